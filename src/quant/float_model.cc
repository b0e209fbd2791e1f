#include "quant/float_model.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"

namespace ferry::quant {

namespace {

StatusOr<std::vector<float>> ReadF32(const formats::WeightSource& src, const std::string& name,
                                     std::vector<int64_t> shape) {
  const formats::TensorRef* t = src.FindTensor(name);
  if (!t) return NotFoundError("'{}': tensor '{}' is missing", src.path(), name);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (t->NumElements() != n || (shape.size() == 2 && (t->shape.size() != 2 || t->shape != shape)))
    return InvalidArgumentError("'{}': tensor '{}' has shape {}, expected {} elements", src.path(), name,
                                t->ShapeString(), n);
  if (!kernels::CanDequantize(t->dtype))
    return UnsupportedError("'{}': tensor '{}' has type {}, which the quantization tools cannot read",
                            src.path(), name, DTypeName(t->dtype));
  const int64_t row = shape.back(), rows = n / row;
  const size_t row_bytes = RowBytes(t->dtype, row);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r)
    kernels::DequantizeRow(t->dtype,
                           static_cast<const uint8_t*>(t->data) + static_cast<size_t>(r) * row_bytes,
                           out.data() + r * row, row);
  return out;
}

}  // namespace

StatusOr<FloatModel> FloatModel::Load(const formats::WeightSource& src) {
  FloatModel m;
  FERRY_ASSIGN_OR_RETURN(m.config, ModelConfig::FromMetadata(src.metadata()));
  m.metadata = src.metadata();
  const ModelConfig& c = m.config;
  if (c.arch != "llama" && c.arch != "qwen2")
    return UnsupportedError("'{}': the quantization tools support llama/qwen2, not '{}'", src.path(), c.arch);
  const int64_t dim = c.dim, q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim, ffn = c.ffn_dim;
  FERRY_ASSIGN_OR_RETURN(m.token_embd, ReadF32(src, "token_embd.weight", {c.n_vocab, dim}));
  m.tied_output = src.FindTensor("output.weight") == nullptr;
  if (m.tied_output) {
    m.output = m.token_embd;
  } else {
    FERRY_ASSIGN_OR_RETURN(m.output, ReadF32(src, "output.weight", {c.n_vocab, dim}));
  }
  FERRY_ASSIGN_OR_RETURN(m.output_norm, ReadF32(src, "output_norm.weight", {dim}));
  const std::array<std::pair<int64_t, int64_t>, 7> shapes = {
      {{q_dim, dim}, {kv_dim, dim}, {kv_dim, dim}, {dim, q_dim}, {ffn, dim}, {ffn, dim}, {dim, ffn}}};
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    FloatLayer L;
    FERRY_ASSIGN_OR_RETURN(L.attn_norm, ReadF32(src, p + "attn_norm.weight", {dim}));
    FERRY_ASSIGN_OR_RETURN(L.ffn_norm, ReadF32(src, p + "ffn_norm.weight", {dim}));
    for (LinearKind k : kAllLinears) {
      auto [o, i] = shapes[static_cast<size_t>(k)];
      L[k].n_out = o;
      L[k].n_in = i;
      FERRY_ASSIGN_OR_RETURN(L[k].w, ReadF32(src, p + LinearStem(k) + ".weight", {o, i}));
    }
    if (src.FindTensor(p + "attn_q.bias")) {
      FERRY_ASSIGN_OR_RETURN(L.bq, ReadF32(src, p + "attn_q.bias", {q_dim}));
      FERRY_ASSIGN_OR_RETURN(L.bk, ReadF32(src, p + "attn_k.bias", {kv_dim}));
      FERRY_ASSIGN_OR_RETURN(L.bv, ReadF32(src, p + "attn_v.bias", {kv_dim}));
    }
    m.layers.push_back(std::move(L));
  }
  if (const formats::TensorRef* rf = src.FindTensor("rope_freqs.weight")) {
    m.rope_freqs = *rf;
    FERRY_ASSIGN_OR_RETURN(m.rope_factors, ReadF32(src, "rope_freqs.weight", {c.rot_dim / 2}));
  }
  return m;
}

namespace {

// FloatModel's tensors under their llama.cpp names, as f32, in place.
class FloatWeightSource final : public formats::WeightSource {
 public:
  explicit FloatWeightSource(const FloatModel& m) {
    const ModelConfig& c = m.config;
    metadata_ = m.metadata;
    path_ = "(f32 weights of the quantization tools)";
    Add("token_embd.weight", m.token_embd, {c.n_vocab, c.dim});
    Add("output.weight", m.output, {c.n_vocab, c.dim});
    Add("output_norm.weight", m.output_norm, {c.dim});
    if (!m.rope_factors.empty()) Add("rope_freqs.weight", m.rope_factors, {c.rot_dim / 2});
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const FloatLayer& L = m.layers[static_cast<size_t>(l)];
      const std::string p = "blk." + std::to_string(l) + ".";
      Add(p + "attn_norm.weight", L.attn_norm, {c.dim});
      Add(p + "ffn_norm.weight", L.ffn_norm, {c.dim});
      for (LinearKind k : kAllLinears) Add(p + LinearStem(k) + ".weight", L[k].w, {L[k].n_out, L[k].n_in});
      if (!L.bq.empty()) {
        Add(p + "attn_q.bias", L.bq, {static_cast<int64_t>(L.bq.size())});
        Add(p + "attn_k.bias", L.bk, {static_cast<int64_t>(L.bk.size())});
        Add(p + "attn_v.bias", L.bv, {static_cast<int64_t>(L.bv.size())});
      }
    }
  }

 private:
  void Add(std::string name, const std::vector<float>& v, std::vector<int64_t> shape) {
    formats::TensorRef t;
    t.name = std::move(name);
    t.dtype = DType::kF32;
    t.shape = std::move(shape);
    t.data = v.data();
    t.nbytes = v.size() * sizeof(float);
    tensors_.push_back(std::move(t));
  }
};

}  // namespace

std::unique_ptr<formats::WeightSource> FloatModel::AsWeightSource() const {
  return std::make_unique<FloatWeightSource>(*this);
}

StatusOr<std::unique_ptr<Model>> FloatModel::Build(const formats::WeightSource& source) {
  ModelOptions o;
  o.repack_weights = false;  // f32 is never packed; said for clarity
  return CreateModel(source, o);
}

std::vector<float> FloatModel::Forward(const std::vector<int32_t>& tokens, const InputHook& on_input,
                                       const ActQuantHook& act_quant, ThreadPool* pool) const {
  const ModelConfig& c = config;
  const int32_t n = static_cast<int32_t>(tokens.size());
  std::vector<float> logits(static_cast<size_t>(n) * static_cast<size_t>(c.n_vocab));  // [n, n_vocab]
  if (n == 0) return logits;
  const std::unique_ptr<formats::WeightSource> src = AsWeightSource();
  StatusOr<std::unique_ptr<Model>> model = Build(*src);
  FERRY_CHECK(model.ok());  // the weights were read from a model that loaded
  StatusOr<ContiguousKvCache> kv =
      ContiguousKvCache::Create(c.n_layers, 1, n, c.n_kv_heads, c.head_dim,
                                KvCacheTypes::F32());  // full precision: calibration and previews
  FERRY_CHECK(kv.ok());
  ForwardBatch b;
  for (int32_t i = 0; i < n; ++i) b.Add(tokens[static_cast<size_t>(i)], i, 0, true);
  const ActivationTaps taps{on_input, act_quant};
  ForwardOptions fo;
  fo.taps = &taps;
  const Status st = (*model)->Forward(b, *kv, logits.data(), pool, fo);
  FERRY_CHECK(st.ok());
  return logits;
}

}  // namespace ferry::quant
