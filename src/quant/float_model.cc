#include "quant/float_model.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace ferry::quant {

const char* LinearStem(LinearKind k) {
  switch (k) {
    case LinearKind::kQ:
      return "attn_q";
    case LinearKind::kK:
      return "attn_k";
    case LinearKind::kV:
      return "attn_v";
    case LinearKind::kO:
      return "attn_output";
    case LinearKind::kGate:
      return "ffn_gate";
    case LinearKind::kUp:
      return "ffn_up";
    case LinearKind::kDown:
      return "ffn_down";
  }
  return "?";
}

InputKind InputOf(LinearKind k) {
  switch (k) {
    case LinearKind::kQ:
    case LinearKind::kK:
    case LinearKind::kV:
      return InputKind::kAttnIn;
    case LinearKind::kO:
      return InputKind::kAttnOut;
    case LinearKind::kGate:
    case LinearKind::kUp:
      return InputKind::kFfnIn;
    case LinearKind::kDown:
      return InputKind::kFfnMid;
  }
  return InputKind::kAttnIn;
}

const char* InputName(InputKind k) {
  switch (k) {
    case InputKind::kAttnIn:
      return "attn_in";
    case InputKind::kAttnOut:
      return "attn_out";
    case InputKind::kFfnIn:
      return "ffn_in";
    case InputKind::kFfnMid:
      return "ffn_mid";
  }
  return "?";
}

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
  // RoPE angles exactly as model/llama.cc builds them.
  const int32_t half = c.rot_dim / 2;
  std::vector<float> factors(static_cast<size_t>(half), 1.0f);
  if (const formats::TensorRef* rf = src.FindTensor("rope_freqs.weight")) {
    m.rope_freqs = *rf;
    FERRY_ASSIGN_OR_RETURN(factors, ReadF32(src, "rope_freqs.weight", {half}));
  }
  const float theta_scale = std::pow(c.rope_theta, -2.0f / static_cast<float>(c.rot_dim));
  float base = 1.0f;
  for (int32_t j = 0; j < half; ++j) {
    m.inv_freq.push_back(base * c.rope_freq_scale / factors[static_cast<size_t>(j)]);
    base *= theta_scale;
  }
  return m;
}

std::vector<float> FloatModel::Forward(const std::vector<int32_t>& tokens, const InputHook& on_input,
                                       const ActQuantHook& act_quant, ThreadPool* pool) const {
  const ModelConfig& c = config;
  const int64_t n = static_cast<int64_t>(tokens.size()), dim = c.dim, q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim, ffn = c.ffn_dim;
  std::vector<float> x(static_cast<size_t>(n * dim));                     // [n, dim] residual
  std::vector<float> xn(x.size()), xa(x.size()), tmp(x.size());           // [n, dim]
  std::vector<float> q(static_cast<size_t>(n * q_dim)), attn(q.size());   // [n, q_dim]
  std::vector<float> kc(static_cast<size_t>(n * kv_dim)), vc(kc.size());  // [n, kv_dim] = one KV block
  std::vector<float> gate(static_cast<size_t>(n * ffn)), up(gate.size()), xf(gate.size());  // [n, ffn]
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int32_t table[1] = {0};
  const kernels::KvBlocks kv{kc.data(), vc.data(), table, static_cast<int32_t>(std::max<int64_t>(n, 1))};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  // y = x W^T for one linear, through the activation hook when there is one.
  auto apply = [&](int32_t l, LinearKind k, const float* in, std::vector<float>& scratch, float* y) {
    const FloatLinear& lin = layers[static_cast<size_t>(l)][k];
    if (act_quant) {
      scratch.assign(in, in + n * lin.n_in);
      act_quant(l, k, scratch.data(), n, lin.n_in);
      in = scratch.data();
    }
    kernels::MatMul(lin.w.data(), DType::kF32, lin.n_out, lin.n_in, in, n, y, pool);
  };
  std::vector<float> scratch;
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(token_embd.data() + static_cast<size_t>(tokens[static_cast<size_t>(i)]) * dim, dim,
                x.data() + i * dim);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const FloatLayer& L = layers[static_cast<size_t>(l)];
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(x.data() + i * dim, L.attn_norm.data(), xn.data() + i * dim, dim, c.rms_eps);
    if (on_input) on_input(l, InputKind::kAttnIn, xn.data(), n, dim);
    apply(l, LinearKind::kQ, xn.data(), scratch, q.data());
    apply(l, LinearKind::kK, xn.data(), scratch, kc.data());
    apply(l, LinearKind::kV, xn.data(), scratch, vc.data());
    for (int64_t i = 0; i < n; ++i) {
      if (!L.bq.empty()) {
        kernels::AddInPlace(q.data() + i * q_dim, L.bq.data(), q_dim);
        kernels::AddInPlace(kc.data() + i * kv_dim, L.bk.data(), kv_dim);
        kernels::AddInPlace(vc.data() + i * kv_dim, L.bv.data(), kv_dim);
      }
      kernels::Rope(q.data() + i * q_dim, c.n_heads, c.head_dim, c.rot_dim, static_cast<int32_t>(i),
                    inv_freq.data(), c.rope_neox);
      kernels::Rope(kc.data() + i * kv_dim, c.n_kv_heads, c.head_dim, c.rot_dim, static_cast<int32_t>(i),
                    inv_freq.data(), c.rope_neox);
    }
    kernels::Attention(q.data(), static_cast<int>(n), pos.data(), c.n_heads, c.n_kv_heads, c.head_dim, scale,
                       kv, attn.data(), pool);
    if (on_input) on_input(l, InputKind::kAttnOut, attn.data(), n, q_dim);
    apply(l, LinearKind::kO, attn.data(), scratch, tmp.data());
    kernels::AddInPlace(x.data(), tmp.data(), n * dim);

    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(x.data() + i * dim, L.ffn_norm.data(), xn.data() + i * dim, dim, c.rms_eps);
    if (on_input) on_input(l, InputKind::kFfnIn, xn.data(), n, dim);
    apply(l, LinearKind::kGate, xn.data(), scratch, gate.data());
    apply(l, LinearKind::kUp, xn.data(), scratch, up.data());
    kernels::SiluMul(gate.data(), up.data(), xf.data(), n * ffn);
    if (on_input) on_input(l, InputKind::kFfnMid, xf.data(), n, ffn);
    apply(l, LinearKind::kDown, xf.data(), scratch, tmp.data());
    kernels::AddInPlace(x.data(), tmp.data(), n * dim);
  }
  for (int64_t i = 0; i < n; ++i)
    kernels::RmsNorm(x.data() + i * dim, output_norm.data(), xn.data() + i * dim, dim, c.rms_eps);
  std::vector<float> logits(static_cast<size_t>(n * c.n_vocab));  // [n, n_vocab]
  kernels::MatMul(output.data(), DType::kF32, c.n_vocab, dim, xn.data(), n, logits.data(), pool);
  return logits;
}

StatusOr<FloatPplResult> FloatPerplexity(const FloatModel& m, const std::vector<int32_t>& tokens,
                                         int32_t n_ctx, int32_t bos, const ActQuantHook& act_quant,
                                         ThreadPool* pool) {
  if (n_ctx < 4) return InvalidArgumentError("context {} is too small (at least 4)", n_ctx);
  const int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (n_chunks == 0)
    return InvalidArgumentError("the text has {} tokens, fewer than one window of {}", tokens.size(), n_ctx);
  const int32_t first = n_ctx / 2, n_vocab = m.config.n_vocab;
  double nll = 0;
  int64_t count = 0;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<int32_t> win(tokens.begin() + chunk * n_ctx, tokens.begin() + (chunk + 1) * n_ctx);
    if (bos >= 0) win[0] = bos;
    const std::vector<float> logits = m.Forward(win, nullptr, act_quant, pool);
    for (int32_t p = first; p < n_ctx - 1; ++p) {
      const float* l = logits.data() + static_cast<size_t>(p) * n_vocab;
      const float mx = *std::max_element(l, l + n_vocab);
      double sum_exp = 0;
      for (int32_t j = 0; j < n_vocab; ++j) sum_exp += std::exp(l[j] - mx);
      nll -= l[tokens[static_cast<size_t>(chunk * n_ctx + p + 1)]] - mx - std::log(sum_exp);
      ++count;
    }
  }
  return FloatPplResult{std::exp(nll / static_cast<double>(count)), count};
}

}  // namespace ferry::quant
