// A plain scalar forward pass of the llama-family architectures (llama, qwen3, qwen3moe, granite,
// smollm3, olmo2, gemma2, gemma3, phi3), written from llama.cpp's graphs (src/models/*.cpp) for the tests and
// sharing no code with model/llama.cc: it reads the metadata keys and tensors itself, in double precision,
// one token at a time over the whole prefix. Slow and obvious on purpose.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "kernels/kernels.h"

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
    const int64_t period = gemma_ ? (g2 ? 2 : 6) : 0;  // layer l slides unless l % period == period - 1
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
      // phi3: one attn_qkv.weight, q rows then k then v.
      const std::vector<double> wqkv = phi3_ ? T(b + "attn_qkv.weight") : std::vector<double>();
      std::vector<double> q = phi3_ ? MatMul(wqkv, xn, n, q_dim, dim_)  // [n, heads, hd]
                                    : MatMul(T(b + "attn_q.weight"), xn, n, q_dim, dim_);
      std::vector<double> k = phi3_ ? MatMul(wqkv, xn, n, kv_dim, dim_, q_dim * dim_)
                                    : MatMul(T(b + "attn_k.weight"), xn, n, kv_dim, dim_);
      std::vector<double> v = phi3_ ? MatMul(wqkv, xn, n, kv_dim, dim_, (q_dim + kv_dim) * dim_)
                                    : MatMul(T(b + "attn_v.weight"), xn, n, kv_dim, dim_);
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
          Softmax(s);
          for (int64_t j = j0; j <= i; ++j)
            for (int64_t d = 0; d < hd_; ++d)
              att[(i * heads_ + h) * hd_ + d] += s[j - j0] * v[(j * kv_heads_ + g) * hd_ + d];
        }
      AddScaled(x, PostNorm(MatMul(T(b + "attn_output.weight"), att, n, dim_, q_dim), n,
                            b + "post_attention_norm"));
      xn = olmo2_ ? x : Norm(x, n, dim_, T(b + "ffn_norm.weight"));
      AddScaled(x, PostNorm(experts_ > 0 ? Moe(b, xn, n)
                            : phi3_      ? FusedSwiGlu(b, xn, n)
                                         : SwiGlu(b + "ffn_", ".weight", xn, n),
                            n, b + "post_ffw_norm"));
    }
    std::vector<double> logits = MatMul(src_.FindTensor("output.weight") ? T("output.weight") : emb,
                                        Norm(x, n, dim_, T("output_norm.weight")), n, vocab_, dim_);
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
  // The first rot_ dims of each head rotate (partial rotary), pair j's angle divided by
  // factors[j]; cos and sin times LongRoPE's attention factor.
  void Rope(std::vector<double>& x, int64_t n, int64_t heads, double theta,
            const std::vector<double>& factors) const {
    const int64_t half = rot_ / 2;
    const double m = rope_attn_factor_;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < half; ++j) {
          const double a = static_cast<double>(i) * std::pow(theta, -2.0 * static_cast<double>(j) / rot_) /
                           factors[static_cast<size_t>(j)];
          double* row = &x[(i * heads + h) * hd_];
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
    const int64_t ffn = static_cast<int64_t>(wg.size()) / dim_ / (experts_ > 0 ? experts_ : 1);
    std::vector<double> g = MatMul(wg, xn, n, ffn, dim_, e * ffn * dim_),
                        u = MatMul(wu, xn, n, ffn, dim_, e * ffn * dim_);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = (gemma_ ? 0.5 * g[i] *
                           (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i])))
                     : g[i] / (1.0 + std::exp(-g[i]))) *
             u[i];
    return MatMul(wd, g, n, dim_, ffn, e * ffn * dim_);
  }
  // phi3: ffn_up.weight [2 ffn, dim] is gate rows then up rows (llama.cpp LLM_FFN_SWIGLU on
  // one tensor: silu(first half) * second half).
  std::vector<double> FusedSwiGlu(const std::string& b, const std::vector<double>& xn, int64_t n) const {
    const std::vector<double> wgu = T(b + "ffn_up.weight"), wd = T(b + "ffn_down.weight");
    const int64_t ffn = static_cast<int64_t>(wgu.size()) / dim_ / 2;
    std::vector<double> g = MatMul(wgu, xn, n, ffn, dim_), u = MatMul(wgu, xn, n, ffn, dim_, ffn * dim_);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return MatMul(wd, g, n, dim_, ffn);
  }
  // qwen3moe (llama.cpp build_moe_ffn, softmax gating, top-k weights renormalized to sum 1).
  std::vector<double> Moe(const std::string& b, const std::vector<double>& xn, int64_t n) const {
    const std::vector<double> logits = MatMul(T(b + "ffn_gate_inp.weight"), xn, n, experts_, dim_);
    std::vector<double> out(static_cast<size_t>(n * dim_));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> p(logits.begin() + i * experts_, logits.begin() + (i + 1) * experts_);
      Softmax(p);
      std::vector<int64_t> order(static_cast<size_t>(experts_));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
      double sum = 0;
      for (int64_t r = 0; r < experts_used_; ++r) sum += p[order[r]];
      const std::vector<double> row(xn.begin() + i * dim_, xn.begin() + (i + 1) * dim_);
      for (int64_t r = 0; r < experts_used_; ++r) {
        const std::vector<double> y = SwiGlu(b + "ffn_", "_exps.weight", row, 1, order[r]);
        for (int64_t d = 0; d < dim_; ++d) out[i * dim_ + d] += p[order[r]] / sum * y[d];
      }
    }
    return out;
  }

  const formats::WeightSource& src_;
  std::string arch_;
  int64_t dim_, layers_, heads_, kv_heads_, hd_, rot_, experts_, experts_used_, vocab_, n_ctx_orig_;
  double eps_, theta_, emb_scale_ = 0, attn_scale_ = 0, res_scale_ = 0, logit_scale_ = 0;
  double attn_softcap_ = 0, final_softcap_ = 0, theta_swa_ = 0, rope_attn_factor_ = 1;
  int64_t window_ = 0;
  bool neox_, qk_norm_, olmo2_, gemma_ = false, phi3_ = false;
  std::vector<bool> sliding_;  // [layers] true: a sliding-window layer
  std::vector<bool> rope_;     // [layers] false: a NoPE layer
};

}  // namespace ferry::testing
