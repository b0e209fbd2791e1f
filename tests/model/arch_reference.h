// A plain scalar forward pass of the llama-family architectures (llama, qwen3, qwen3moe, granite,
// smollm3, olmo2, gemma2, gemma3, phi3, gpt-oss, deepseek2), written from llama.cpp's graphs
// (src/models/*.cpp) for the tests and sharing no code with model/llama.cc: it reads the metadata keys and
// tensors itself, in double precision, one token at a time over the whole prefix. Slow and obvious on
// purpose.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref.h"

namespace ferry::testing {

class ReferenceForward {
 public:
  explicit ReferenceForward(const formats::WeightSource& src) : src_(src) {
    const Metadata& md = src.metadata();
    arch_ = *md.GetString("general.architecture");
    const std::string p = arch_ + ".";
    dim_ = *md.GetInt(p + "embedding_length");
    layers_ = *md.GetInt(p + "block_count");
    heads_ = *md.GetInt(p + "attention.head_count");
    kv_heads_ = md.GetInt(p + "attention.head_count_kv").value_or(heads_);
    hd_ = md.GetInt(p + "attention.key_length").value_or(dim_ / heads_);
    eps_ = *md.GetFloat(p + "attention.layer_norm_rms_epsilon");
    theta_ = md.GetFloat(p + "rope.freq_base").value_or(10000.0);
    experts_ = md.GetInt(p + "expert_count").value_or(0);
    experts_used_ = md.GetInt(p + "expert_used_count").value_or(0);
    vocab_ = *md.GetInt(p + "vocab_size");
    neox_ = arch_.rfind("qwen", 0) == 0 || arch_ == "olmo2" || arch_ == "phi3" ||
            md.GetBool("ferry.rope.neox").value_or(false);
    rot_ = md.GetInt(p + "rope.dimension_count").value_or(hd_);
    // phi3 (src/models/phi3.cpp, llama_model::get_rope_factors): LongRoPE divisors and the
    // attention factor on the rotated dims' cos and sin.
    phi3_ = arch_ == "phi3";
    rope_attn_factor_ = md.GetFloat(p + "rope.scaling.attn_factor").value_or(1.0);
    n_ctx_orig_ = md.GetInt(p + "rope.scaling.original_context_length")
                      .value_or(md.GetInt(p + "context_length").value_or(2048));
    qk_norm_ = arch_ == "qwen3" || arch_ == "qwen3moe";
    olmo2_ = arch_ == "olmo2";
    // gemma (src/models/gemma2.cpp, gemma3.cpp and their load_arch_hparams defaults).
    const bool g2 = arch_ == "gemma2";
    gemma_ = g2 || arch_ == "gemma3";
    if (gemma_) {
      neox_ = true;
      qk_norm_ = !g2;
      emb_scale_ = std::sqrt(static_cast<double>(dim_));
      attn_softcap_ = g2 ? md.GetFloat(p + "attn_logit_softcapping").value_or(50.0) : 0.0;
      final_softcap_ = md.GetFloat(p + "final_logit_softcapping").value_or(g2 ? 30.0 : 0.0);
      window_ = md.GetInt(p + "attention.sliding_window").value_or(g2 ? 4096 : 0);
      theta_swa_ = md.GetFloat(p + "rope.freq_base_swa").value_or(g2 ? theta_ : 10000.0);
    }
    // gpt-oss (src/models/openai-moe.cpp): every other layer slides, layer 0 first; sinks, biases,
    // YaRN (llama-context.cpp + ggml rope_yarn: beta_fast 32, beta_slow 1, ext_factor 1).
    oss_ = arch_ == "gpt-oss";
    if (oss_) {
      neox_ = true;
      window_ = *md.GetInt(p + "attention.sliding_window");
      theta_swa_ = md.GetFloat(p + "rope.freq_base_swa").value_or(theta_);
    }
    if (md.GetString(p + "rope.scaling.type").value_or("") == "yarn") {
      yarn_factor_ = *md.GetFloat(p + "rope.scaling.factor");
      rope_attn_factor_ *= 1.0 + 0.1 * std::log(yarn_factor_);  // YaRN's magnitude scale on cos and sin
    }
    // deepseek2 as Hugging Face's modeling_deepseek.py writes it (not absorbed: each head's K and V
    // decompressed from the latent). The file keeps 0.1 mscale_all_dim; YaRN's cos/sin magnitude
    // is then mscale(f, m_all) / mscale(f, m_all) = 1 and the scores' scale mscale(f, m_all)^2 /
    // sqrt(q head dims), mscale(f, m) = 1 + 0.1 m ln f.
    mla_ = arch_ == "deepseek2";
    if (mla_) {
      kv_lora_ = *md.GetInt(p + "attention.kv_lora_rank");
      q_lora_ = md.GetInt(p + "attention.q_lora_rank").value_or(0);
      mla_kd_ = *md.GetInt(p + "attention.key_length_mla");
      mla_vd_ = *md.GetInt(p + "attention.value_length_mla");
      dense_layers_ = md.GetInt(p + "leading_dense_block_count").value_or(0);
      moe_scale_ = md.GetFloat(p + "expert_weights_scale").value_or(0.0);
      const double m_all = md.GetFloat(p + "rope.scaling.yarn_log_multiplier").value_or(0.0) / 0.1;
      if (yarn_factor_ > 0 && m_all != 0) rope_attn_factor_ = 1.0;
      const double mscale = yarn_factor_ > 1 ? 1.0 + 0.1 * m_all * std::log(yarn_factor_) : 1.0;
      attn_scale_ = mscale * mscale / std::sqrt(static_cast<double>(mla_kd_));
    }
    moe_norm_ = md.GetBool(p + "expert_weights_norm").value_or(!mla_);
    const int64_t period = gemma_ ? (g2 ? 2 : 6)
                           : oss_ ? 2
                                  : 0;  // layer l slides unless l % period == period - 1
    for (int64_t l = 0; l < layers_; ++l) sliding_.push_back(window_ > 0 && l % period < period - 1);
    if (arch_ == "granite") {  // llama.cpp's f_*_scale; 0 = not applied
      emb_scale_ = md.GetFloat(p + "embedding_scale").value_or(0.0);
      attn_scale_ = md.GetFloat(p + "attention.scale").value_or(0.0);
      res_scale_ = md.GetFloat(p + "residual_scale").value_or(0.0);
      logit_scale_ = *md.GetFloat(p + "logit_scale");
    }
    for (int64_t l = 0; l < layers_; ++l) {
      bool rope = !(arch_ == "smollm3" && (l + 1) % 4 == 0);  // llama.cpp: n_no_rope_layer_step 4
      if (auto list = md.GetIntArray("ferry.rope.nope_layers")) rope = (*list)[static_cast<size_t>(l)] == 0;
      rope_.push_back(rope);
    }
  }

  // logits: [n, vocab] for tokens at positions 0..n-1 of one sequence, in a context of n_ctx
  // positions (which picks LongRoPE's long or short factors; 0: short).
  std::vector<double> Run(const std::vector<int32_t>& toks, int64_t n_ctx = 0) const {
    const char* factors_name = n_ctx > n_ctx_orig_ ? "rope_factors_long.weight" : "rope_factors_short.weight";
    const std::vector<double> factors = src_.FindTensor(factors_name)
                                            ? T(factors_name)
                                            : std::vector<double>(static_cast<size_t>(rot_ / 2), 1.0);
    const int64_t n = static_cast<int64_t>(toks.size()), q_dim = heads_ * hd_, kv_dim = kv_heads_ * hd_;
    const std::vector<double> emb = T("token_embd.weight");
    std::vector<double> x(static_cast<size_t>(n * dim_));  // [n, dim] residual stream
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < dim_; ++d)
        x[i * dim_ + d] = emb[toks[i] * dim_ + d] * (emb_scale_ != 0 ? emb_scale_ : 1.0);
    for (int64_t l = 0; l < layers_; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      // olmo2 (llama.cpp src/models/olmo2.cpp): no pre norms; attention and FFN read x itself.
      std::vector<double> xn = olmo2_ ? x : Norm(x, n, dim_, T(b + "attn_norm.weight"));
      if (mla_) {
        AddScaled(x, MlaAttention(b, xn, n));
        xn = Norm(x, n, dim_, T(b + "ffn_norm.weight"));
        AddScaled(x, l < dense_layers_ ? SwiGlu(b + "ffn_", ".weight", xn, n) : Moe(b, xn, n));
        continue;
      }
      // phi3: one attn_qkv.weight, q rows then k then v.
      const std::vector<double> wqkv = phi3_ ? T(b + "attn_qkv.weight") : std::vector<double>();
      std::vector<double> q =
          phi3_ ? MatMul(wqkv, Acts(b + "attn_qkv.weight", xn), n, q_dim, dim_)  // [n, heads, hd]
                : MatMul(T(b + "attn_q.weight"), Acts(b + "attn_q.weight", xn), n, q_dim, dim_);
      std::vector<double> k =
          phi3_ ? MatMul(wqkv, Acts(b + "attn_qkv.weight", xn), n, kv_dim, dim_, q_dim * dim_)
                : MatMul(T(b + "attn_k.weight"), Acts(b + "attn_k.weight", xn), n, kv_dim, dim_);
      std::vector<double> v =
          phi3_ ? MatMul(wqkv, Acts(b + "attn_qkv.weight", xn), n, kv_dim, dim_, (q_dim + kv_dim) * dim_)
                : MatMul(T(b + "attn_v.weight"), Acts(b + "attn_v.weight", xn), n, kv_dim, dim_);
      if (src_.FindTensor(b + "attn_q.bias")) {  // gpt-oss (and qwen2): biases on q, k, v
        AddBias(q, n, T(b + "attn_q.bias"));
        AddBias(k, n, T(b + "attn_k.bias"));
        AddBias(v, n, T(b + "attn_v.bias"));
      }
      if (qk_norm_) {  // every head of q and k on its own
        q = Norm(q, n * heads_, hd_, T(b + "attn_q_norm.weight"));
        k = Norm(k, n * kv_heads_, hd_, T(b + "attn_k_norm.weight"));
      }
      if (olmo2_) {  // all heads together
        q = Norm(q, n, q_dim, T(b + "attn_q_norm.weight"));
        k = Norm(k, n, kv_dim, T(b + "attn_k_norm.weight"));
      }
      const bool slides = sliding_[static_cast<size_t>(l)];
      if (rope_[static_cast<size_t>(l)]) {
        Rope(q, n, heads_, slides ? theta_swa_ : theta_, factors);
        Rope(k, n, kv_heads_, slides ? theta_swa_ : theta_, factors);
      }
      const double scale = attn_scale_ != 0 ? attn_scale_ : 1.0 / std::sqrt(static_cast<double>(hd_));
      std::vector<double> att(static_cast<size_t>(n * q_dim));  // [n, heads, hd]
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < heads_; ++h) {
          const int64_t g = h / (heads_ / kv_heads_);
          const int64_t j0 =
              slides ? std::max<int64_t>(0, i - window_ + 1) : 0;  // llama.cpp: i - j >= window masked
          std::vector<double> s(static_cast<size_t>(i + 1 - j0));
          for (int64_t j = j0; j <= i; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < hd_; ++d)
              dot += q[(i * heads_ + h) * hd_ + d] * k[(j * kv_heads_ + g) * hd_ + d];
            s[j - j0] = SoftCap(dot * scale, attn_softcap_);
          }
          if (oss_) {  // the head's sink logit joins the softmax's denominator only
            s.push_back(T(b + "attn_sinks.weight")[static_cast<size_t>(h)]);
            Softmax(s);
            s.pop_back();
          } else {
            Softmax(s);
          }
          for (int64_t j = j0; j <= i; ++j)
            for (int64_t d = 0; d < hd_; ++d)
              att[(i * heads_ + h) * hd_ + d] += s[j - j0] * v[(j * kv_heads_ + g) * hd_ + d];
        }
      std::vector<double> o =
          MatMul(T(b + "attn_output.weight"), Acts(b + "attn_output.weight", att), n, dim_, q_dim);
      if (src_.FindTensor(b + "attn_output.bias")) AddBias(o, n, T(b + "attn_output.bias"));
      AddScaled(x, PostNorm(o, n, b + "post_attention_norm"));
      xn = olmo2_ ? x : Norm(x, n, dim_, T(b + (oss_ ? "post_attention_norm.weight" : "ffn_norm.weight")));
      AddScaled(x, PostNorm(experts_ > 0 ? Moe(b, xn, n)
                            : phi3_      ? FusedSwiGlu(b, xn, n)
                                         : SwiGlu(b + "ffn_", ".weight", xn, n),
                            n, b + "post_ffw_norm"));
    }
    const char* head = src_.FindTensor("output.weight") ? "output.weight" : "token_embd.weight";
    std::vector<double> logits =
        MatMul(T(head), Acts(head, Norm(x, n, dim_, T("output_norm.weight"))), n, vocab_, dim_);
    if (logit_scale_ != 0)
      for (double& z : logits) z /= logit_scale_;
    for (double& z : logits) z = SoftCap(z, final_softcap_);
    return logits;
  }

 private:
  // Any stored type, as doubles in the file's order (outermost dimension first).
  std::vector<double> T(const std::string& name) const {
    const formats::TensorRef* t = src_.FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return {};
    std::vector<float> f(static_cast<size_t>(t->NumElements()));
    kernels::DequantizeRow(t->dtype, t->data, f.data(), t->NumElements());
    return std::vector<double>(f.begin(), f.end());
  }
  // x ([rows of the weight's cols]) as llama.cpp feeds a matmul with weight `name`: rounded to
  // q8_0 with its x86 rounding (ref::QuantizeActQ8_0) for q4_0 / q5_0 / q8_0 / mxfp4 weights,
  // to f16 for f16 weights, as it is for f32 ones. Quantized files then differ from Ferry by
  // summation order only, as the f32 ones do.
  std::vector<double> Acts(const std::string& name, const std::vector<double>& x) const {
    const formats::TensorRef* t = src_.FindTensor(name);
    if (!t) return x;
    const DType act = kernels::MatMulActivationType(t->dtype);
    if (act != DType::kQ8_0 && act != DType::kF16) return x;
    const int64_t cols = t->shape.back(), rows = static_cast<int64_t>(x.size()) / cols;
    std::vector<double> out(x.size());
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> q(RowBytes(act, cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(x[r * cols + c]);
      if (act == DType::kQ8_0) {
        kernels::ref::QuantizeActQ8_0(row.data(), q.data(), cols);
      } else {
        kernels::ref::QuantizeActF16(row.data(), q.data(), cols);
      }
      kernels::DequantizeRow(act, q.data(), row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = row[c];
    }
    return out;
  }
  // y: [n, rows] = x: [n, cols] . w^T, w: [rows, cols] (w may be a slice at offset `w0`).
  static std::vector<double> MatMul(const std::vector<double>& w, const std::vector<double>& x, int64_t n,
                                    int64_t rows, int64_t cols, int64_t w0 = 0) {
    std::vector<double> y(static_cast<size_t>(n * rows));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t c = 0; c < cols; ++c) s += w[w0 + r * cols + c] * x[i * cols + c];
        y[i * rows + r] = s;
      }
    return y;
  }
  std::vector<double> Norm(const std::vector<double>& x, int64_t rows, int64_t n,
                           const std::vector<double>& w) const {
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps_);
      for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * w[i];
    }
    return y;
  }
  static double SoftCap(double x, double cap) { return cap > 0 ? cap * std::tanh(x / cap) : x; }
  // y: [n, b.size()] += b per row.
  static void AddBias(std::vector<double>& y, int64_t n, const std::vector<double>& b) {
    const int64_t w = static_cast<int64_t>(b.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < w; ++r) y[i * w + r] += b[r];
  }
  // YaRN's frequency multiplier of pair j (1 without YaRN): between the correction dims of
  // beta_fast (32) and beta_slow (1) the original frequency fades into the interpolated one.
  double YarnMix(int64_t j, double theta) const {
    if (yarn_factor_ == 0) return 1.0;
    auto corr = [&](double beta) {
      return rot_ * std::log(static_cast<double>(n_ctx_orig_) / (beta * 2 * M_PI)) / (2 * std::log(theta));
    };
    const double lo = std::max(0.0, std::floor(corr(32))), hi = std::min(rot_ - 1.0, std::ceil(corr(1)));
    const double ramp = 1.0 - std::clamp((static_cast<double>(j) - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
    return (1.0 - ramp) / yarn_factor_ + ramp;
  }
  // The first rot_ dims of each head rotate (partial rotary), pair j's angle divided by
  // factors[j]; cos and sin times LongRoPE's attention factor.
  void Rope(std::vector<double>& x, int64_t n, int64_t heads, double theta,
            const std::vector<double>& factors) const {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h) RopeRow(&x[(i * heads + h) * hd_], i, theta, factors);
  }
  // The first rot_ values of row, at position pos.
  void RopeRow(double* row, int64_t pos, double theta, const std::vector<double>& factors) const {
    const int64_t half = rot_ / 2;
    const double m = rope_attn_factor_;
    for (int64_t j = 0; j < half; ++j) {
      const double a = static_cast<double>(pos) * std::pow(theta, -2.0 * static_cast<double>(j) / rot_) /
                       factors[static_cast<size_t>(j)] * YarnMix(j, theta);
      double& x0 = neox_ ? row[j] : row[2 * j];
      double& x1 = neox_ ? row[j + half] : row[2 * j + 1];
      const double c = m * std::cos(a), s = m * std::sin(a);
      const double r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
      x0 = r0;
      x1 = r1;
    }
  }
  static void Softmax(std::vector<double>& s) {
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& v : s) sum += (v = std::exp(v - m));
    for (double& v : s) v /= sum;
  }
  // olmo2's norm of a block's output before the residual add; others add it as it is.
  std::vector<double> PostNorm(const std::vector<double>& y, int64_t n, const std::string& name) const {
    return olmo2_ || gemma_ ? Norm(y, n, dim_, T(name + ".weight")) : y;
  }
  void AddScaled(std::vector<double>& x, const std::vector<double>& delta) const {
    for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i] * (res_scale_ != 0 ? res_scale_ : 1.0);
  }
  // down(silu(gate x) * up x) of one dense FFN, or of expert e of a 3-D expert tensor.
  std::vector<double> SwiGlu(const std::string& pre, const std::string& post, const std::vector<double>& xn,
                             int64_t n, int64_t e = 0) const {
    const std::vector<double> wg = T(pre + "gate" + post), wu = T(pre + "up" + post),
                              wd = T(pre + "down" + post);
    const int64_t ffn = static_cast<int64_t>(wg.size()) / dim_ / (post == "_exps.weight" ? experts_ : 1);
    std::vector<double> g = MatMul(wg, Acts(pre + "gate" + post, xn), n, ffn, dim_, e * ffn * dim_),
                        u = MatMul(wu, Acts(pre + "up" + post, xn), n, ffn, dim_, e * ffn * dim_);
    if (oss_) {  // gpt-oss: biases, then llama.cpp's swiglu_oai (alpha 1.702, limit 7)
      const std::vector<double> bg = T(pre + "gate_exps.bias"), bu = T(pre + "up_exps.bias"),
                                bd = T(pre + "down_exps.bias");
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < ffn; ++r) {
          const double gx = std::min(g[i * ffn + r] + bg[e * ffn + r], 7.0);
          const double ux = std::clamp(u[i * ffn + r] + bu[e * ffn + r], -7.0, 7.0);
          g[i * ffn + r] = gx / (1.0 + std::exp(-1.702 * gx)) * (ux + 1.0);
        }
      std::vector<double> y = MatMul(wd, Acts(pre + "down" + post, g), n, dim_, ffn, e * ffn * dim_);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < dim_; ++d) y[i * dim_ + d] += bd[e * dim_ + d];
      return y;
    }
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = (gemma_ ? 0.5 * g[i] *
                           (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i])))
                     : g[i] / (1.0 + std::exp(-g[i]))) *
             u[i];
    return MatMul(wd, Acts(pre + "down" + post, g), n, dim_, ffn, e * ffn * dim_);
  }
  // phi3: ffn_up.weight [2 ffn, dim] is gate rows then up rows (llama.cpp LLM_FFN_SWIGLU on
  // one tensor: silu(first half) * second half).
  std::vector<double> FusedSwiGlu(const std::string& b, const std::vector<double>& xn, int64_t n) const {
    const std::vector<double> wgu = T(b + "ffn_up.weight"), wd = T(b + "ffn_down.weight");
    const int64_t ffn = static_cast<int64_t>(wgu.size()) / dim_ / 2;
    const std::vector<double> xa = Acts(b + "ffn_up.weight", xn);
    std::vector<double> g = MatMul(wgu, xa, n, ffn, dim_), u = MatMul(wgu, xa, n, ffn, dim_, ffn * dim_);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return MatMul(wd, Acts(b + "ffn_down.weight", g), n, dim_, ffn);
  }
  // qwen3moe (llama.cpp build_moe_ffn, softmax gating, top-k weights renormalized to sum 1);
  // gpt-oss (SOFTMAX_WEIGHT gating: router bias, top k of the logits, softmax over those k).
  std::vector<double> Moe(const std::string& b, const std::vector<double>& xn, int64_t n) const {
    std::vector<double> logits = MatMul(T(b + "ffn_gate_inp.weight"), xn, n, experts_, dim_);
    if (oss_) AddBias(logits, n, T(b + "ffn_gate_inp.bias"));
    std::vector<double> out(static_cast<size_t>(n * dim_));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> p(logits.begin() + i * experts_, logits.begin() + (i + 1) * experts_);
      if (!oss_) Softmax(p);
      std::vector<int64_t> order(static_cast<size_t>(experts_));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
      if (oss_) {  // the k chosen logits' own softmax
        std::vector<double> chosen;
        for (int64_t r = 0; r < experts_used_; ++r) chosen.push_back(p[order[r]]);
        Softmax(chosen);
        for (int64_t r = 0; r < experts_used_; ++r) p[order[r]] = chosen[r];
      }
      double sum = 0;
      for (int64_t r = 0; r < experts_used_; ++r) sum += p[order[r]];
      if (!moe_norm_ && !oss_) sum = 1.0;
      if (moe_scale_ != 0) sum /= moe_scale_;  // deepseek2's routed_scaling_factor
      const std::vector<double> row(xn.begin() + i * dim_, xn.begin() + (i + 1) * dim_);
      for (int64_t r = 0; r < experts_used_; ++r) {
        const std::vector<double> y = SwiGlu(b + "ffn_", "_exps.weight", row, 1, order[r]);
        for (int64_t d = 0; d < dim_; ++d) out[i * dim_ + d] += p[order[r]] / sum * y[d];
      }
    }
    if (src_.FindTensor(b + "ffn_gate_shexp.weight") && !src_.FindTensor(b + "ffn_gate_inp_shexp.weight")) {
      const std::vector<double> y = SwiGlu(b + "ffn_", "_shexp.weight", xn, n);  // deepseek2: always on
      for (size_t i = 0; i < out.size(); ++i) out[i] += y[i];
    }
    return out;
  }
  // deepseek2's attention in the form of the paper / modeling_deepseek.py: q from the low-rank
  // q_a / q_b (or one attn_q), the latent c = norm(kv_a rows) and the shared k_pe; per head
  // k = [W_UK c | rope(k_pe)], v = W_UV c, q = [q_nope | rope(q_pe)]; attn_k_b holds W_UK^T
  // ([heads, kv_lora, nope]) and attn_v_b W_UV ([heads, v, kv_lora]).
  std::vector<double> MlaAttention(const std::string& b, const std::vector<double>& xn, int64_t n) const {
    const int64_t nope = mla_kd_ - rot_, r = kv_lora_, qd = heads_ * mla_kd_;
    std::vector<double> q;  // [n, heads, nope | rot]
    if (q_lora_ > 0) {
      q = Norm(MatMul(T(b + "attn_q_a.weight"), xn, n, q_lora_, dim_), n, q_lora_,
               T(b + "attn_q_a_norm.weight"));
      q = MatMul(T(b + "attn_q_b.weight"), q, n, qd, q_lora_);
    } else {
      q = MatMul(T(b + "attn_q.weight"), xn, n, qd, dim_);
    }
    const std::vector<double> kva = MatMul(T(b + "attn_kv_a_mqa.weight"), xn, n, r + rot_, dim_);
    std::vector<double> c(static_cast<size_t>(n * r)), kpe(static_cast<size_t>(n * rot_));
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(kva.begin() + i * (r + rot_), r, c.begin() + i * r);
      std::copy_n(kva.begin() + i * (r + rot_) + r, rot_, kpe.begin() + i * rot_);
    }
    c = Norm(c, n, r, T(b + "attn_kv_a_norm.weight"));
    const std::vector<double> ones(static_cast<size_t>(rot_ / 2), 1.0);
    for (int64_t i = 0; i < n; ++i) {
      RopeRow(&kpe[i * rot_], i, theta_, ones);
      for (int64_t h = 0; h < heads_; ++h) RopeRow(&q[(i * heads_ + h) * mla_kd_ + nope], i, theta_, ones);
    }
    const std::vector<double> wkb = T(b + "attn_k_b.weight"), wvb = T(b + "attn_v_b.weight");
    std::vector<double> att(static_cast<size_t>(n * heads_ * mla_vd_));  // [n, heads, v]
    for (int64_t h = 0; h < heads_; ++h) {
      std::vector<double> k(static_cast<size_t>(n * nope)), v(static_cast<size_t>(n * mla_vd_));
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t d = 0; d < nope; ++d)
          for (int64_t a = 0; a < r; ++a) k[j * nope + d] += wkb[(h * r + a) * nope + d] * c[j * r + a];
        for (int64_t d = 0; d < mla_vd_; ++d)
          for (int64_t a = 0; a < r; ++a) v[j * mla_vd_ + d] += wvb[(h * mla_vd_ + d) * r + a] * c[j * r + a];
      }
      for (int64_t i = 0; i < n; ++i) {
        const double* qi = &q[(i * heads_ + h) * mla_kd_];
        std::vector<double> s(static_cast<size_t>(i + 1));
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < nope; ++d) dot += qi[d] * k[j * nope + d];
          for (int64_t d = 0; d < rot_; ++d) dot += qi[nope + d] * kpe[j * rot_ + d];
          s[j] = dot * attn_scale_;
        }
        Softmax(s);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < mla_vd_; ++d)
            att[(i * heads_ + h) * mla_vd_ + d] += s[j] * v[j * mla_vd_ + d];
      }
    }
    return MatMul(T(b + "attn_output.weight"), att, n, dim_, heads_ * mla_vd_);
  }

  const formats::WeightSource& src_;
  std::string arch_;
  int64_t dim_, layers_, heads_, kv_heads_, hd_, rot_, experts_, experts_used_, vocab_, n_ctx_orig_;
  double eps_, theta_, emb_scale_ = 0, attn_scale_ = 0, res_scale_ = 0, logit_scale_ = 0;
  double attn_softcap_ = 0, final_softcap_ = 0, theta_swa_ = 0, rope_attn_factor_ = 1, yarn_factor_ = 0;
  int64_t window_ = 0;
  bool neox_, qk_norm_, olmo2_, gemma_ = false, phi3_ = false, oss_ = false, mla_ = false, moe_norm_ = true;
  int64_t kv_lora_ = 0, q_lora_ = 0, mla_kd_ = 0, mla_vd_ = 0, dense_layers_ = 0;  // deepseek2
  double moe_scale_ = 0;
  std::vector<bool> sliding_;  // [layers] true: a sliding-window layer
  std::vector<bool> rope_;     // [layers] false: a NoPE layer
};

}  // namespace ferry::testing
