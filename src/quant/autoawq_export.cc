#include "quant/autoawq_export.h"

#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/fp16.h"
#include "formats/awq_import.h"
#include "formats/safetensors.h"
#include "kernels/kernels.h"

namespace ferry::quant {
namespace {

const char* HfModule(LinearKind k) {
  switch (k) {
    case LinearKind::kQ:
      return "self_attn.q_proj";
    case LinearKind::kK:
      return "self_attn.k_proj";
    case LinearKind::kV:
      return "self_attn.v_proj";
    case LinearKind::kO:
      return "self_attn.o_proj";
    case LinearKind::kGate:
      return "mlp.gate_proj";
    case LinearKind::kUp:
      return "mlp.up_proj";
    case LinearKind::kDown:
      return "mlp.down_proj";
  }
  return "?";
}

}  // namespace

int64_t GgufRowOfHfRow(int64_t r, int64_t head_dim) {
  // llama.cpp's converter interleaves each head's halves: HF row h*hd + a*hd/2 + b is GGUF
  // row h*hd + 2b + a.
  const int64_t half = head_dim / 2, h = r / head_dim, a = (r % head_dim) / half, b = r % half;
  return h * head_dim + 2 * b + a;
}

StatusOr<AutoAwqExportReport> ExportAutoAwq(const std::string& dir, const FloatModel& m,
                                            const PayloadMap& payloads, int64_t group) {
  const ModelConfig& c = m.config;
  if (m.rope_freqs.data)
    return UnsupportedError(
        "--export autoawq: models with rope_freqs (llama3 RoPE scaling) are not supported yet");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create folder '{}': {}", dir, ec.message());
  const DType type = group == 32 ? DType::kI4G32 : group == 64 ? DType::kI4G64 : DType::kI4G128;

  std::deque<std::vector<uint8_t>> store;  // bytes of every tensor written (stable addresses)
  std::vector<formats::SafetensorsTensor> tensors;
  auto add = [&](std::string name, DType t, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    store.push_back(std::move(bytes));
    tensors.push_back({std::move(name), t, std::move(shape), store.back().data(), store.back().size()});
  };
  auto add_f32 = [&](std::string name, const std::vector<float>& v, std::vector<int64_t> shape) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    add(std::move(name), DType::kF32, std::move(shape), std::move(b));
  };
  // Rows of q/k in HF order: permute GGUF rows unless the model already uses rotate-half.
  auto hf_row = [&](LinearKind k, int64_t r) {
    const bool qk = k == LinearKind::kQ || k == LinearKind::kK;
    return qk && !c.rope_neox ? GgufRowOfHfRow(r, c.head_dim) : r;
  };

  add_f32("model.embed_tokens.weight", m.token_embd, {c.n_vocab, c.dim});
  add_f32("model.norm.weight", m.output_norm, {c.dim});
  if (!m.tied_output) add_f32("lm_head.weight", m.output, {c.n_vocab, c.dim});
  AutoAwqExportReport rep;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const FloatLayer& L = m.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add_f32(p + "input_layernorm.weight", L.attn_norm, {c.dim});
    add_f32(p + "post_attention_layernorm.weight", L.ffn_norm, {c.dim});
    for (LinearKind k : kAllLinears) {
      const FloatLinear& lin = L[k];
      const std::string mod = p + HfModule(k);
      auto it = payloads.find({l, k});
      if (it == payloads.end() || it->second.type != type)
        return InvalidArgumentError("--export autoawq: layer {} {} is not int4 with group {}", l,
                                    LinearStem(k), group);
      const uint8_t* rows = it->second.bytes.data();  // [n_out, RowBytes] Ferry int4
      const size_t rb = RowBytes(type, lin.n_in), gb = 4 + static_cast<size_t>(group) / 2;
      const std::vector<float>* bias = k == LinearKind::kQ   ? &L.bq
                                       : k == LinearKind::kK ? &L.bk
                                       : k == LinearKind::kV ? &L.bv
                                                             : nullptr;
      if (bias && !bias->empty()) {
        std::vector<float> b(bias->size());
        for (int64_t r = 0; r < lin.n_out; ++r)
          b[static_cast<size_t>(r)] = (*bias)[static_cast<size_t>(hf_row(k, r))];
        add_f32(mod + ".bias", b, {lin.n_out});
      }
      if (lin.n_in % group != 0 || lin.n_out % 8 != 0) {
        // Dense: the dequantized int4 values, exactly (f32).
        std::vector<float> w(static_cast<size_t>(lin.n_out * lin.n_in));
        for (int64_t r = 0; r < lin.n_out; ++r)
          kernels::DequantizeRow(type, rows + static_cast<size_t>(hf_row(k, r)) * rb, w.data() + r * lin.n_in,
                                 lin.n_in);
        add_f32(mod + ".weight", w, {lin.n_out, lin.n_in});
        rep.not_converted.push_back(mod);
        continue;
      }
      const int64_t ng = lin.n_in / group, n8 = lin.n_out / 8;
      std::vector<uint32_t> qweight(static_cast<size_t>(lin.n_in * n8), 0),
          qzeros(static_cast<size_t>(ng * n8), 0);
      std::vector<uint16_t> scales(static_cast<size_t>(ng * lin.n_out));
      for (int64_t r = 0; r < lin.n_out; ++r) {
        const uint8_t* src = rows + static_cast<size_t>(hf_row(k, r)) * rb;
        int slot = 0;  // slot of column r within its int32: kAwqOrder[slot] == r % 8
        while (formats::kAwqOrder[slot] != r % 8) ++slot;
        for (int64_t g = 0; g < ng; ++g) {
          const uint8_t* grp = src + static_cast<size_t>(g) * gb;
          std::memcpy(&scales[static_cast<size_t>(g * lin.n_out + r)], grp, 2);
          qzeros[static_cast<size_t>(g * n8 + r / 8)] |= static_cast<uint32_t>(grp[2] & 0xF) << (4 * slot);
          for (int64_t i = 0; i < group; ++i) {
            const uint8_t byte = grp[4 + 16 * (i / 32) + i % 16];
            const uint32_t q = (i % 32) < 16 ? (byte & 0xF) : (byte >> 4);
            qweight[static_cast<size_t>((g * group + i) * n8 + r / 8)] |= q << (4 * slot);
          }
        }
      }
      auto bytes_of = [](const void* p, size_t n) {
        return std::vector<uint8_t>(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
      };
      add(mod + ".qweight", DType::kI32, {lin.n_in, n8}, bytes_of(qweight.data(), qweight.size() * 4));
      add(mod + ".qzeros", DType::kI32, {ng, n8}, bytes_of(qzeros.data(), qzeros.size() * 4));
      add(mod + ".scales", DType::kF16, {ng, lin.n_out}, bytes_of(scales.data(), scales.size() * 2));
      ++rep.converted;
    }
  }
  FERRY_RETURN_IF_ERROR(
      formats::WriteSafetensors((std::filesystem::path(dir) / "model.safetensors").string(), tensors));

  nlohmann::ordered_json cfg;
  const bool qwen2 = c.arch == "qwen2";
  cfg["architectures"] = {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
  cfg["model_type"] = qwen2 ? "qwen2" : "llama";
  cfg["hidden_size"] = c.dim;
  cfg["intermediate_size"] = c.ffn_dim;
  cfg["num_hidden_layers"] = c.n_layers;
  cfg["num_attention_heads"] = c.n_heads;
  cfg["num_key_value_heads"] = c.n_kv_heads;
  cfg["head_dim"] = c.head_dim;
  cfg["vocab_size"] = c.n_vocab;
  cfg["max_position_embeddings"] = c.n_ctx_train;
  cfg["rms_norm_eps"] = c.rms_eps;
  cfg["rope_theta"] = c.rope_theta;
  cfg["hidden_act"] = "silu";
  cfg["tie_word_embeddings"] = m.tied_output;
  cfg["torch_dtype"] = "float16";
  cfg["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4},
                                {"group_size", group},   {"zero_point", true},
                                {"version", "gemm"},     {"modules_to_not_convert", rep.not_converted}};
  std::ofstream f(std::filesystem::path(dir) / "config.json");
  f << cfg.dump(2) << "\n";
  if (!f) return IoError("cannot write '{}/config.json'", dir);
  return rep;
}

}  // namespace ferry::quant
