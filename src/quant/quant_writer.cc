#include "quant/quant_writer.h"

#include <deque>

#include "formats/gguf.h"

namespace ferry::quant {

Status WriteQuantizedGguf(const std::string& path, const formats::WeightSource& source,
                          const FloatModel& model, const PayloadMap& payloads, const QuantRecipe& recipe) {
  Metadata md = source.metadata();
  if (recipe.file_type >= 0) md.SetUint("general.file_type", static_cast<uint64_t>(recipe.file_type));
  if (!recipe.method.empty()) md.SetString("ferry.quant.method", recipe.method);
  if (!recipe.scheme.empty()) md.SetString("ferry.quant.scheme", recipe.scheme);
  if (recipe.bits > 0) md.SetInt("ferry.quant.bits", recipe.bits);
  if (recipe.group_size > 0) md.SetInt("ferry.quant.group_size", recipe.group_size);
  if (recipe.alpha >= 0) md.SetFloat("ferry.quant.alpha", recipe.alpha);
  if (!recipe.calibration.empty()) md.SetString("ferry.quant.calibration", recipe.calibration);
  for (const auto& [k, v] : recipe.extra) md.SetString("ferry.quant." + k, v);

  std::vector<formats::GgufTensorToWrite> tensors;
  std::deque<std::vector<float>> keep;  // storage for values computed here (stable addresses)
  auto f32 = [&](const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape) {
    tensors.push_back({name, DType::kF32, std::move(shape), v.data(), v.size() * sizeof(float)});
  };
  auto copy = [&](const std::string& name) -> Status {
    const formats::TensorRef* t = source.FindTensor(name);
    if (!t) return NotFoundError("'{}': tensor '{}' is missing", source.path(), name);
    tensors.push_back({name, t->dtype, t->shape, t->data, t->nbytes});
    return Status::Ok();
  };
  const ModelConfig& c = model.config;
  FERRY_RETURN_IF_ERROR(copy("token_embd.weight"));
  if (!model.tied_output) FERRY_RETURN_IF_ERROR(copy("output.weight"));
  f32("output_norm.weight", model.output_norm, {c.dim});
  if (model.rope_freqs.data) FERRY_RETURN_IF_ERROR(copy("rope_freqs.weight"));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const FloatLayer& L = model.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    f32(p + "attn_norm.weight", L.attn_norm, {c.dim});
    f32(p + "ffn_norm.weight", L.ffn_norm, {c.dim});
    if (!L.bq.empty()) {
      f32(p + "attn_q.bias", L.bq, {static_cast<int64_t>(L.bq.size())});
      f32(p + "attn_k.bias", L.bk, {static_cast<int64_t>(L.bk.size())});
      f32(p + "attn_v.bias", L.bv, {static_cast<int64_t>(L.bv.size())});
    }
    for (LinearKind k : kAllLinears) {
      const FloatLinear& lin = L[k];
      const std::string name = p + LinearStem(k) + ".weight";
      auto it = payloads.find({l, k});
      if (it == payloads.end() || it->second.type == DType::kF32) {
        f32(name, lin.w, {lin.n_out, lin.n_in});
        continue;
      }
      const LinearPayload& pl = it->second;
      tensors.push_back({name, pl.type, {lin.n_out, lin.n_in}, pl.bytes.data(), pl.bytes.size()});
      if (pl.type == DType::kI8) {
        f32(p + LinearStem(k) + ".weight_scale", pl.weight_scale, {lin.n_out});
        if (pl.input_scale) {
          keep.push_back({*pl.input_scale});
          f32(p + LinearStem(k) + ".input_scale", keep.back(), {1});
        }
      }
    }
  }
  formats::GgufWriteOptions opts;
  opts.show_progress = false;
  return formats::WriteGguf(path, md, tensors, opts);
}

}  // namespace ferry::quant
