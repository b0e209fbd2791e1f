#include "model/llama.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "kernels/kernels.h"
#include "model/attention_sparsity.h"
#include "model/linear.h"
#include "model/moe.h"
#include "model/sparse_ffn.h"

namespace ferry {
namespace {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  Linear wq, wk, wv, wo;                   // [q_dim, dim], [kv_dim, dim] x2, [dim, q_dim]
  std::vector<float> bq, bk, bv;           // [q_dim], [kv_dim], [kv_dim] (qwen2 only)
  Linear w_gate, w_up, w_down;             // [ffn, dim] x2, [dim, ffn]
  Linear wqkv, w_gate_up;                  // stacked q|k|v, gate|up rows (linear.h StackRows); n_out 0 if not
  std::unique_ptr<MoeFfn> moe;             // MoE models: replaces w_gate/w_up/w_down
};

// Reads weights by llama.cpp name, checking shapes and types; every message names the tensor.
class WeightReader {
 public:
  WeightReader(const formats::WeightSource& src) : src_(src) {}

  StatusOr<Linear> Matrix(const std::string& name, int64_t n_out, int64_t n_in) const {
    return LoadLinear(src_, name, n_out, n_in);  // model/linear.cc
  }

  // Small vectors (norms, biases) are converted to f32 once at load.
  StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) const {
    const formats::TensorRef* t = src_.FindTensor(name);
    if (!t) return NotFoundError("'{}': tensor '{}' is missing", src_.path(), name);
    if (t->NumElements() != n)
      return InvalidArgumentError("'{}': tensor '{}' has shape {}, expected [{}]", src_.path(), name,
                                  t->ShapeString(), n);
    if (!kernels::CanDequantize(t->dtype) || !RowBytesChecked(t->dtype, n))
      return UnsupportedError("'{}': tensor '{}' has unsupported type {}", src_.path(), name,
                              DTypeName(t->dtype));
    std::vector<float> out(static_cast<size_t>(n));
    kernels::DequantizeRow(t->dtype, t->data, out.data(), n);
    return out;
  }

  bool Has(const std::string& name) const { return src_.FindTensor(name) != nullptr; }

 private:
  const formats::WeightSource& src_;
};

class LlamaModel final : public Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                               const ModelOptions& options);

  Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool) override;
  size_t WeightBytes() const override { return weight_bytes_; }

 private:
  Status CheckBatch(const ForwardBatch& batch, const KvCache& kv) const;
  std::vector<AttentionWeightsRef> AttentionRefs() const;
  void EmbedTokens(const ForwardBatch& batch, float* x) const;

  Linear token_embd_;               // [n_vocab, dim]
  Linear output_;                   // [n_vocab, dim] (= token_embd_ when tied)
  std::vector<float> output_norm_;  // [dim]
  std::vector<LayerWeights> layers_;
  std::vector<float> inv_freq_;  // [rot_dim/2] RoPE angle per position, scaling applied
  size_t weight_bytes_ = 0;
  SparseAttention attn_sparsity_;          // pruned heads, value skipping, progressive precision
  std::unique_ptr<SparseFfn> sparse_ffn_;  // contextual FFN sparsity when asked for at load

  // Per-call scratch, sized to the largest batch seen (no state carried between calls).
  struct Scratch {
    std::vector<float> x, xn, q, k, v, attn, tmp, gate, up, hidden, qkv, gate_up;
  } s_;
};

StatusOr<std::unique_ptr<Model>> LlamaModel::Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                                  const ModelOptions& options) {
  auto m = std::make_unique<LlamaModel>();
  m->config_ = cfg;
  m->sparsity_ = options.sparsity;
  WeightReader r(src);
  const int64_t dim = cfg.dim, q_dim = int64_t{cfg.n_heads} * cfg.head_dim,
                kv_dim = int64_t{cfg.n_kv_heads} * cfg.head_dim, ffn = cfg.ffn_dim;
  FERRY_ASSIGN_OR_RETURN(m->token_embd_, r.Matrix("token_embd.weight", cfg.n_vocab, dim));
  if (!kernels::CanDequantize(m->token_embd_.type))
    return UnsupportedError("'{}': token_embd.weight type {} cannot be read", src.path(),
                            DTypeName(m->token_embd_.type));
  if (r.Has("output.weight")) {
    FERRY_ASSIGN_OR_RETURN(m->output_, r.Matrix("output.weight", cfg.n_vocab, dim));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  FERRY_ASSIGN_OR_RETURN(m->output_norm_, r.Vector("output_norm.weight", dim));
  m->weight_bytes_ = m->output_.bytes;
  ThreadPool pack_pool;  // repacking at load: one pass over the weights on every core
  m->output_.MaybePack(options.repack_weights, &pack_pool);  // token_embd_ stays in place for row lookups
  for (int32_t l = 0; l < cfg.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights w;
    FERRY_ASSIGN_OR_RETURN(w.attn_norm, r.Vector(p + "attn_norm.weight", dim));
    FERRY_ASSIGN_OR_RETURN(w.ffn_norm, r.Vector(p + "ffn_norm.weight", dim));
    FERRY_ASSIGN_OR_RETURN(w.wq, r.Matrix(p + "attn_q.weight", q_dim, dim));
    FERRY_ASSIGN_OR_RETURN(w.wk, r.Matrix(p + "attn_k.weight", kv_dim, dim));
    FERRY_ASSIGN_OR_RETURN(w.wv, r.Matrix(p + "attn_v.weight", kv_dim, dim));
    FERRY_ASSIGN_OR_RETURN(w.wo, r.Matrix(p + "attn_output.weight", dim, q_dim));
    if (cfg.IsMoe()) {
      FERRY_ASSIGN_OR_RETURN(w.moe, MoeFfn::Load(src, cfg, l, options.repack_weights, &pack_pool));
      m->weight_bytes_ += w.moe->ActiveBytesPerToken();
    } else {
      FERRY_ASSIGN_OR_RETURN(w.w_gate, r.Matrix(p + "ffn_gate.weight", ffn, dim));
      FERRY_ASSIGN_OR_RETURN(w.w_up, r.Matrix(p + "ffn_up.weight", ffn, dim));
      FERRY_ASSIGN_OR_RETURN(w.w_down, r.Matrix(p + "ffn_down.weight", dim, ffn));
    }
    if (r.Has(p + "attn_q.bias")) {
      FERRY_ASSIGN_OR_RETURN(w.bq, r.Vector(p + "attn_q.bias", q_dim));
      FERRY_ASSIGN_OR_RETURN(w.bk, r.Vector(p + "attn_k.bias", kv_dim));
      FERRY_ASSIGN_OR_RETURN(w.bv, r.Vector(p + "attn_v.bias", kv_dim));
    }
    for (Linear* lin : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      if (!lin->data) continue;  // MoE layers have no dense FFN
      m->weight_bytes_ += lin->bytes;
      lin->MaybePack(options.repack_weights, &pack_pool);
    }
    w.wqkv = StackRows({&w.wq, &w.wk, &w.wv}, &pack_pool);
    w.w_gate_up = StackRows({&w.w_gate, &w.w_up}, &pack_pool);
    m->layers_.push_back(std::move(w));
  }
  if (options.sparsity.UsesFfnSparsity()) {
    std::vector<FfnLinears> ffns;
    for (const LayerWeights& w : m->layers_) ffns.push_back({&w.w_gate, &w.w_up, &w.w_down, &w.w_gate_up});
    FERRY_ASSIGN_OR_RETURN(m->sparse_ffn_, SparseFfn::Create(options.sparsity, cfg, ffns, &pack_pool));
  }

  // theta_j = pos * base^(-2j/rot_dim) * freq_scale / factor_j, the exponent built up
  // multiplicatively in float as llama.cpp does, so angles agree to the last bit or so.
  const int32_t half = cfg.rot_dim / 2;
  std::vector<float> factors(static_cast<size_t>(half), 1.0f);
  if (r.Has("rope_freqs.weight")) {
    FERRY_ASSIGN_OR_RETURN(factors, r.Vector("rope_freqs.weight", half));
  }
  const float theta_scale = std::pow(cfg.rope_theta, -2.0f / static_cast<float>(cfg.rot_dim));
  float base = 1.0f;
  for (int32_t j = 0; j < half; ++j) {
    m->inv_freq_.push_back(base * cfg.rope_freq_scale / factors[static_cast<size_t>(j)]);
    base *= theta_scale;
  }
  FERRY_RETURN_IF_ERROR(m->attn_sparsity_.Configure(m->sparsity_, cfg, m->AttentionRefs()));
  return std::unique_ptr<Model>(std::move(m));
}

std::vector<AttentionWeightsRef> LlamaModel::AttentionRefs() const {
  std::vector<AttentionWeightsRef> refs;
  for (const LayerWeights& w : layers_) refs.push_back({&w.wq, &w.wk, &w.wv, &w.wo, &w.bq, &w.bk, &w.bv});
  return refs;
}

Status LlamaModel::CheckBatch(const ForwardBatch& b, const KvCache& kv) const {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq_ids.size() != n || b.want_logits.size() != n)
    return InvalidArgumentError("forward batch arrays have different lengths");
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= config_.n_vocab)
      return InvalidArgumentError("token id {} is outside the vocabulary [0, {})", b.tokens[i],
                                  config_.n_vocab);
    if (b.positions[i] < 0 || b.positions[i] >= kv.MaxSeqLen())
      return OutOfRangeError("position {} exceeds the context size {}", b.positions[i], kv.MaxSeqLen());
    if (b.seq_ids[i] < 0 || b.seq_ids[i] >= kv.NumSeqs())
      return InvalidArgumentError("sequence id {} is outside [0, {})", b.seq_ids[i], kv.NumSeqs());
    if (i > 0 && b.seq_ids[i] == b.seq_ids[i - 1] && b.positions[i] != b.positions[i - 1] + 1)
      return InvalidArgumentError("positions of sequence {} are not consecutive", b.seq_ids[i]);
  }
  // Each sequence must appear as one contiguous run.
  for (size_t i = 1; i < n; ++i) {
    if (b.seq_ids[i] == b.seq_ids[i - 1]) continue;
    for (size_t j = 0; j < i; ++j)
      if (b.seq_ids[j] == b.seq_ids[i])
        return InvalidArgumentError("sequence {} is split within the batch", b.seq_ids[i]);
  }
  return Status::Ok();
}

void LlamaModel::EmbedTokens(const ForwardBatch& b, float* x) const {
  const size_t row_bytes = RowBytes(token_embd_.type, config_.dim);
  for (int32_t i = 0; i < b.size(); ++i) {
    const auto* row = static_cast<const uint8_t*>(token_embd_.data) +
                      row_bytes * static_cast<size_t>(b.tokens[static_cast<size_t>(i)]);
    kernels::DequantizeRow(token_embd_.type, row, x + static_cast<size_t>(i) * config_.dim, config_.dim);
  }
}

Status LlamaModel::Forward(const ForwardBatch& b, KvCache& kv, float* logits, ThreadPool* pool) {
  FERRY_RETURN_IF_ERROR(CheckBatch(b, kv));
  const ModelConfig& c = config_;
  const int64_t n = b.size();
  if (n == 0) return Status::Ok();
  FERRY_RETURN_IF_ERROR(attn_sparsity_.Configure(sparsity_, c, AttentionRefs()));  // no-op if unchanged
  FERRY_RETURN_IF_ERROR(attn_sparsity_.BeginForward(sparsity_, kv, sparsity_stats_));
  FERRY_RETURN_IF_ERROR(kv.BeginForward(b));
  // Where each token's K/V live: its position, unless a budgeted cache stores kept tokens densely.
  std::vector<int32_t> slots(static_cast<size_t>(n));  // [n]
  for (int64_t i = 0; i < n; ++i)
    slots[static_cast<size_t>(i)] =
        kv.Slot(b.seq_ids[static_cast<size_t>(i)], b.positions[static_cast<size_t>(i)]);
  int64_t sum_keys = 0;  // keys attended in this pass, over all queries (head-pruning counts)
  for (int32_t slot : slots) sum_keys += slot + 1;
  const int64_t dim = c.dim, q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  // Attention is one kernel call per sequence run.
  const std::vector<ForwardBatch::SeqRun> runs = b.SeqRuns();
  // A decode batch is many one-query runs, each too small to be worth the pool inside the
  // kernel: spread the runs over the threads instead. Threads never change a row's bits, so
  // outputs are identical either way. Not when one run would dominate (its split across
  // threads is worth more), nor with sparse attention or H2O, which count into shared state.
  const bool spread_runs =
      pool && pool->size() > 1 && runs.size() > 1 && static_cast<int64_t>(runs.size()) == n &&
      int64_t{*std::max_element(slots.begin(), slots.end()) + 1} * pool->size() <= sum_keys &&
      !sparsity_.UsesSparseAttention() && !kv.AttentionWeightSums(0, b.seq_ids[0]);
  auto fit = [](std::vector<float>& v, int64_t size) {
    if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
    return v.data();
  };
  float* x = fit(s_.x, n * dim);              // [n, dim] residual stream
  float* xn = fit(s_.xn, n * dim);            // [n, dim] normalized
  float* q = fit(s_.q, n * q_dim);            // [n, n_heads, head_dim]
  float* k = fit(s_.k, n * kv_dim);           // [n, n_kv_heads, head_dim]
  float* v = fit(s_.v, n * kv_dim);           // [n, n_kv_heads, head_dim]
  float* attn = fit(s_.attn, n * q_dim);      // [n, n_heads, head_dim]
  float* tmp = fit(s_.tmp, n * dim);          // [n, dim]
  float* gate = fit(s_.gate, n * c.ffn_dim);  // [n, ffn]
  float* up = fit(s_.up, n * c.ffn_dim);      // [n, ffn]
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  EmbedTokens(b, x);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    if (l == 0) {  // later layers get their norm fused with the previous residual add
      for (int64_t i = 0; i < n; ++i)
        kernels::RmsNorm(x + i * dim, w.attn_norm.data(), xn + i * dim, dim, c.rms_eps);
    }
    if (attn_sparsity_.IsPruned(l)) {  // only the kept heads' q/k/v rows, attention and W_o columns
      attn_sparsity_.ForwardPrunedLayer(sparsity_, c, l, xn, b, slots.data(), inv_freq_.data(), kv, tmp,
                                        sparsity_stats_, pool);
    } else {
      if (w.wqkv.n_out > 0) {
        const int64_t qkv_dim = q_dim + 2 * kv_dim;
        float* qkv = fit(s_.qkv, n * qkv_dim);  // [n, q_dim + 2 * kv_dim]
        w.wqkv.Apply(xn, n, qkv, pool);
        for (int64_t i = 0; i < n; ++i) {
          std::copy_n(qkv + i * qkv_dim, q_dim, q + i * q_dim);
          std::copy_n(qkv + i * qkv_dim + q_dim, kv_dim, k + i * kv_dim);
          std::copy_n(qkv + i * qkv_dim + q_dim + kv_dim, kv_dim, v + i * kv_dim);
        }
      } else {
        w.wq.Apply(xn, n, q, pool);
        w.wk.Apply(xn, n, k, pool);
        w.wv.Apply(xn, n, v, pool);
      }
      for (int64_t i = 0; i < n; ++i) {
        if (!w.bq.empty()) {
          kernels::AddInPlace(q + i * q_dim, w.bq.data(), q_dim);
          kernels::AddInPlace(k + i * kv_dim, w.bk.data(), kv_dim);
          kernels::AddInPlace(v + i * kv_dim, w.bv.data(), kv_dim);
        }
        const int32_t pos = b.positions[static_cast<size_t>(i)], seq = b.seq_ids[static_cast<size_t>(i)];
        kernels::Rope(q + i * q_dim, c.n_heads, c.head_dim, c.rot_dim, pos, inv_freq_.data(), c.rope_neox);
        kernels::Rope(k + i * kv_dim, c.n_kv_heads, c.head_dim, c.rot_dim, pos, inv_freq_.data(),
                      c.rope_neox);
        kv.StoreKey(l, seq, slots[static_cast<size_t>(i)], k + i * kv_dim);
        SparseAttention::CopyKeyInt8(kv, l, seq, slots[static_cast<size_t>(i)], k + i * kv_dim, c.n_kv_heads,
                                     c.head_dim);
        kv.StoreValue(l, seq, slots[static_cast<size_t>(i)], v + i * kv_dim);
      }
      auto attend = [&](const ForwardBatch::SeqRun& r, ThreadPool* p) {
        const int32_t seq = b.seq_ids[static_cast<size_t>(r.begin)];
        const int n_q = static_cast<int>(r.end - r.begin);
        attn_sparsity_.Attend(sparsity_, c, q + r.begin * q_dim, n_q, slots.data() + r.begin, kv.View(l, seq),
                              attn + r.begin * q_dim, sparsity_stats_, p);
        if (float* sums = kv.AttentionWeightSums(l, seq))  // H2O: what each kept key was paid
          kernels::AccumulateAttentionWeights(q + r.begin * q_dim, n_q, slots.data() + r.begin, c.n_heads,
                                              c.n_kv_heads, c.head_dim, scale, kv.View(l, seq), sums);
      };
      if (spread_runs) {  // each run on one thread, runs handed out one at a time
        std::atomic<size_t> next{0};
        pool->Run([&](int, int) {
          for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < runs.size();)
            attend(runs[i], nullptr);
        });
      } else {
        for (const ForwardBatch::SeqRun& r : runs) attend(r, pool);
      }
      w.wo.Apply(attn, n, tmp, pool);
    }
    if (sparsity_.UsesHeadPruning()) attn_sparsity_.CountHeadWork(c, l, n, sum_keys, sparsity_stats_);
    for (int64_t i = 0; i < n; ++i)
      kernels::AddRmsNorm(x + i * dim, tmp + i * dim, w.ffn_norm.data(), xn + i * dim, dim, c.rms_eps);
    if (w.moe) {
      w.moe->Forward(xn, n, tmp, sparsity_.moe_capacity_factor, &sparsity_stats_, pool);
    } else if (sparse_ffn_ && sparsity_.UsesFfnSparsity()) {
      sparse_ffn_->Forward(l, {&w.w_gate, &w.w_up, &w.w_down, &w.w_gate_up}, sparsity_, xn, n, tmp,
                           &sparsity_stats_, pool);
    } else {
      if (w.w_gate_up.n_out > 0) {
        const int64_t ffn = c.ffn_dim;
        float* gu = fit(s_.gate_up, n * 2 * ffn);  // [n, 2 * ffn]: gate | up per token
        w.w_gate_up.Apply(xn, n, gu, pool);
        for (int64_t i = 0; i < n; ++i)
          kernels::SiluMul(gu + i * 2 * ffn, gu + i * 2 * ffn + ffn, gate + i * ffn, ffn);
      } else {
        w.w_gate.Apply(xn, n, gate, pool);
        w.w_up.Apply(xn, n, up, pool);
        kernels::SiluMul(gate, up, gate, n * c.ffn_dim);
      }
      w.w_down.Apply(gate, n, tmp, pool);  // [n, dim]
    }
    if (l + 1 < c.n_layers) {  // residual add fused with the next layer's attention norm
      const std::vector<float>& next_norm = layers_[static_cast<size_t>(l) + 1].attn_norm;
      for (int64_t i = 0; i < n; ++i)
        kernels::AddRmsNorm(x + i * dim, tmp + i * dim, next_norm.data(), xn + i * dim, dim, c.rms_eps);
    } else {
      kernels::AddInPlace(x, tmp, n * dim);
    }
  }

  // Final norm and head only for the tokens whose logits are wanted.
  int64_t n_out = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!b.want_logits[static_cast<size_t>(i)]) continue;
    kernels::RmsNorm(x + i * dim, output_norm_.data(), xn + n_out * dim, dim, c.rms_eps);
    ++n_out;
  }
  if (n_out > 0) output_.Apply(xn, n_out, logits, pool);
  kv.EndForward(b);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> CreateLlamaModel(const formats::WeightSource& source,
                                                  const ModelConfig& config, const ModelOptions& options) {
  return LlamaModel::Load(source, config, options);
}

}  // namespace ferry
