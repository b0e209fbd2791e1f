// LlamaModel's forward pass: embeddings, the layers (attention or latent attention, dense,
// MoE or contextual-sparse FFN, residuals and norms), the head, and the pipeline's exchanges.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/llama_model.h"
#include "model/logit_candidates.h"

namespace ferry::llama_internal {
namespace {

// x[i] *= s: granite's multipliers and LongRoPE's attention factor, on buffers of a few rows
// (not worth a kernel).
void ScaleInPlace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// Scratch slots of the layer (model/scratch.h).
enum Slot : int {
  kX,
  kXn,
  kQ,
  kK,
  kV,
  kAttn,
  kTmp,
  kGate,
  kUp,
  kQkv,
  kGateUp,
  kTapped,
  kLogitsPart,
  kMlaQa,    // [n, q_lora]
  kMlaQ,     // [n, n_heads, mla_k_dim] the heads' own queries
  kMlaKv,    // [n, kv_lora + rot] latent rows
  kMlaIn,    // [n_heads, n, max(nope, kv_lora)] per-head inputs of W_UK^T / W_UV
  kMlaOut,   // [n_heads, n, max(kv_lora, v_dim)] their outputs
  kMlaV,     // [n, n_heads v_dim]
  kRope,     // [n, rot_dim/2, 2] each token's RoPE cos and sin (global layers)
  kRopeSwa,  // [n, rot_dim/2, 2] the same for sliding-window layers (their own base)
};
enum IntSlot : int { kKvSlots, kRowTopK };
enum ByteSlot : int { kLogitsSend, kLogitsAll };

}  // namespace

Status LlamaModel::CheckBatch(const ForwardBatch& b, const KvCache& kv) const {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq_ids.size() != n || b.want_logits.size() != n ||
      (!b.logits_top_k.empty() && b.logits_top_k.size() != n))
    return InvalidArgumentError("forward batch arrays have different lengths");
  for (int32_t k : b.logits_top_k)
    if (k < 0) return InvalidArgumentError("a forward batch asks for the top {} logits of a row (0: all)", k);
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

Status LlamaModel::CheckRunOptions(const ForwardOptions& options, const SparsityOptions& so) const {
  if (options.sparsity) {
    FERRY_RETURN_IF_ERROR(attn_sparsity_.CheckRunOptions(so));
    if (so.UsesFfnSparsity() &&
        (!sparse_ffn_ || so.ffn_stats != sparsity_.ffn_stats || so.ffn_predictor != sparsity_.ffn_predictor))
      return InvalidArgumentError(
          "FFN sparsity with sidecar '{}' was not loaded with the model: load it with the sidecar to run",
          so.ffn_predictor.empty() ? so.ffn_stats : so.ffn_predictor);
  }
  if (options.taps && !so.Exact())
    return InvalidArgumentError("activation taps run the exact model only (no sparsity options)");
  if ((config_.sliding_window > 0 || config_.attn_softcap > 0.0f) && so.UsesSparseAttention())
    return InvalidArgumentError(
        "sparse attention (head pruning, value skipping, progressive scores) is not supported for {} "
        "(sliding-window / soft-capped attention)",
        config_.arch);
  if (config_.IsMla() && (options.taps || !so.OnlyMoeCapacity()))
    return UnsupportedError(
        "{} (multi-head latent attention) runs without activation taps (quantization calibration) or "
        "sparsity "
        "options",
        config_.arch);
  if (par_.Split() && (options.taps || !so.OnlyMoeCapacity()))
    return UnsupportedError("a model split over processes runs without activation taps or sparsity options");
  return Status::Ok();
}

AttentionBlock LlamaModel::BlockOf(int32_t l) const {
  AttentionBlock blk;
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  if (!w.q_norm.empty()) {  // per-head weights: the same for pruned and dense layers
    blk.q_norm = w.q_norm.data();
    blk.k_norm = w.k_norm.data();
    blk.qk_norm_whole = config_.qk_norm_whole;
  }
  if (const SparseAttention::PrunedLayer* pr = attn_sparsity_.Pruned(l)) {
    const int64_t qd = static_cast<int64_t>(pr->kept.size()) * config_.head_dim;
    const int64_t kvd = static_cast<int64_t>(pr->kept_kv.size()) * config_.head_dim;
    blk.wqkv = &pr->wqkv;
    if (!pr->bias.empty()) {
      blk.bq = pr->bias.data();
      blk.bk = blk.bq + qd;
      blk.bv = blk.bk + kvd;
    }
    blk.wo = &pr->wo;
    blk.n_q = static_cast<int>(pr->kept.size());
    blk.n_kv = static_cast<int>(pr->kept_kv.size());
    blk.kv_heads = pr->kept_kv.data();
    blk.head_kv = pr->head_kv.data();
    return blk;
  }
  blk.wqkv = w.wqkv.n_out > 0 ? &w.wqkv : nullptr;
  blk.wq = &w.wq;
  blk.wk = &w.wk;
  blk.wv = &w.wv;
  if (!w.bq.empty()) {
    blk.bq = w.bq.data();
    blk.bk = w.bk.data();
    blk.bv = w.bv.data();
  }
  blk.wo = &w.wo;
  blk.n_q = config_.n_heads;
  blk.n_kv = config_.n_kv_heads;
  return blk;
}

void LlamaModel::Tap(const Pass& p, int32_t l, InputKind input, const float* x, int64_t n_in) const {
  if (p.taps && p.taps->on_input) p.taps->on_input(l, input, x, p.n, n_in);
}

void LlamaModel::Apply(const Pass& p, int32_t l, LinearKind kind, const Linear& w, const float* x,
                       float* y) const {
  if (p.taps && p.taps->act_quant) {                        // each linear quantizes its own copy of the input
    float* copy = p.s.layer.Floats(kTapped, p.n * w.n_in);  // [n, n_in]
    std::copy_n(x, p.n * w.n_in, copy);
    p.taps->act_quant(l, kind, copy, p.n, w.n_in);
    x = copy;
  }
  w.Apply(x, p.n, y, p.pool);
}

void LlamaModel::WriteKv(const Pass& p, int32_t l, const AttentionBlock& blk, int64_t i, const float* k,
                         const float* v) const {
  const ModelConfig& c = config_;
  const int32_t seq = p.b.seq_ids[static_cast<size_t>(i)], slot = p.slots[i];
  if (!blk.kv_heads) {  // k, v: [n_kv_heads, head_dim], stored in the cache's K/V types
    p.kv.StoreKey(l, seq, slot, k);
    SparseAttention::CopyKeyInt8(p.kv, l, seq, slot, k, c.n_kv_heads, c.head_dim);
    p.kv.StoreValue(l, seq, slot, v);
    return;
  }
  const int64_t hd = c.head_dim;  // pruned: only the kept KV heads, at their place in the cache
  for (int j = 0; j < blk.n_kv; ++j) {
    const int32_t g = blk.kv_heads[j];
    p.kv.StoreKeyHead(l, seq, slot, g, k + j * hd);
    p.kv.StoreValueHead(l, seq, slot, g, v + j * hd);
  }
  if (int8_t* k8 = p.kv.KeySlotInt8(l, seq, slot)) {
    float* ks = p.kv.KeyScaleSlot(l, seq, slot);
    for (int j = 0; j < blk.n_kv; ++j) {
      const int64_t g = blk.kv_heads[j];
      ks[g] = kernels::QuantizeActInt8(k + j * hd, c.head_dim, 0.f, k8 + g * hd);
    }
  }
}

void LlamaModel::Attention(const Pass& p, int32_t l, const float* xn, float* out) const {
  const ModelConfig& c = config_;
  if (c.IsMla()) return MlaAttention(p, l, xn, out);
  const AttentionBlock blk = BlockOf(l);
  const int64_t n = p.n, hd = c.head_dim, qd = blk.n_q * hd, kvd = blk.n_kv * hd;
  float* q = p.s.layer.Floats(kQ, n * qd);  // [n, n_q, hd] what attention reads
  // Projected rows: q_rows/k_rows/v_rows with their row strides (one stacked matrix or three).
  float *q_rows, *k_rows, *v_rows;
  int64_t q_stride = qd, kv_stride = kvd;
  Tap(p, l, InputKind::kAttnIn, xn, c.dim);
  if (blk.wqkv && !p.taps) {
    const int64_t width = qd + 2 * kvd;
    float* qkv = p.s.layer.Floats(kQkv, n * width);  // [n, n_q + 2 n_kv, hd]
    blk.wqkv->Apply(xn, n, qkv, p.pool);
    q_rows = qkv;
    k_rows = qkv + qd;
    v_rows = qkv + qd + kvd;
    q_stride = kv_stride = width;
  } else {
    q_rows = q;
    k_rows = p.s.layer.Floats(kK, n * kvd);  // [n, n_kv, hd]
    v_rows = p.s.layer.Floats(kV, n * kvd);  // [n, n_kv, hd]
    Apply(p, l, LinearKind::kQ, *blk.wq, xn, q_rows);
    Apply(p, l, LinearKind::kK, *blk.wk, xn, k_rows);
    Apply(p, l, LinearKind::kV, *blk.wv, xn, v_rows);
  }
  const float* cs = c.IsSlidingLayer(l) ? p.rope_cs_swa : p.rope_cs;  // [n, rot_dim/2, 2]
  for (int64_t i = 0; i < n; ++i) {
    float *qi = q_rows + i * q_stride, *ki = k_rows + i * kv_stride, *vi = v_rows + i * kv_stride;
    if (blk.bq) {
      kernels::AddInPlace(qi, blk.bq, qd);
      kernels::AddInPlace(ki, blk.bk, kvd);
      kernels::AddInPlace(vi, blk.bv, kvd);
    }
    if (blk.qk_norm_whole) {  // olmo2: all heads of q, of k, normalized together
      kernels::RmsNorm(qi, blk.q_norm, qi, qd, c.rms_eps);
      kernels::RmsNorm(ki, blk.k_norm, ki, kvd, c.rms_eps);
    } else if (blk.q_norm) {  // qwen3: each head RMS-normalized on its own, before RoPE
      for (int h = 0; h < blk.n_q; ++h) kernels::RmsNorm(qi + h * hd, blk.q_norm, qi + h * hd, hd, c.rms_eps);
      for (int h = 0; h < blk.n_kv; ++h)
        kernels::RmsNorm(ki + h * hd, blk.k_norm, ki + h * hd, hd, c.rms_eps);
    }
    if (c.UsesRope(l)) {  // SmolLM3's NoPE layers attend by content alone
      kernels::Rope(qi, blk.n_q, c.head_dim, c.rot_dim, cs + i * c.rot_dim, c.rope_neox);
      kernels::Rope(ki, blk.n_kv, c.head_dim, c.rot_dim, cs + i * c.rot_dim, c.rope_neox);
    }
    if (p.kv.types().rotate_k) {  // --cache-rotate: q.k unchanged, K's outliers spread before rounding
      kernels::HadamardRotate(qi, blk.n_q, hd);
      kernels::HadamardRotate(ki, blk.n_kv, hd);
    }
    if (qi != q + i * qd) std::copy_n(qi, qd, q + i * qd);
    WriteKv(p, l, blk, i, ki, vi);
  }
  float* attn = p.s.layer.Floats(kAttn, n * qd);  // [n, n_q, hd]
  AttendRuns(p, l, blk, q, attn);
  Tap(p, l, InputKind::kAttnOut, attn, qd);
  Apply(p, l, LinearKind::kO, *blk.wo, attn, out);
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  if (!w.bo.empty())
    for (int64_t i = 0; i < n; ++i) kernels::AddInPlace(out + i * c.dim, w.bo.data(), c.dim);
}

void LlamaModel::AttendRuns(const Pass& p, int32_t l, const AttentionBlock& blk, const float* q,
                            float* attn) const {
  const ModelConfig& c = config_;
  // A latent cache (KvCacheTypes::v_in_k) returns fewer values per head than q has.
  const int64_t qd = blk.n_q * c.head_dim, od = blk.n_q * int64_t{p.kv.types().ValueDim(c.head_dim)};
  const float scale = c.AttentionScale();
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  const kernels::AttentionVariant variant{c.IsSlidingLayer(l) ? c.sliding_window : 0, c.attn_softcap,
                                          w.sinks.empty() ? nullptr : w.sinks.data()};
  auto attend = [&](const ForwardBatch::SeqRun& r, ThreadPool* pool) {
    const int32_t seq = p.b.seq_ids[static_cast<size_t>(r.begin)];
    const int n_q = static_cast<int>(r.end - r.begin);
    attn_sparsity_.Attend(p.so, c, q + r.begin * qd, n_q, blk.n_q, blk.head_kv, p.slots + r.begin,
                          p.kv.View(l, seq), attn + r.begin * od, p.stats, pool, variant);
    if (blk.head_kv) return;
    if (float* sums = p.kv.AttentionWeightSums(l, seq))  // H2O: what each kept key was paid
      kernels::AccumulateAttentionWeights(q + r.begin * qd, n_q, p.slots + r.begin, c.n_heads, c.n_kv_heads,
                                          c.head_dim, scale, p.kv.View(l, seq), sums);
  };
  const std::vector<ForwardBatch::SeqRun>& runs = p.s.runs;
  if (p.spread_runs) {  // each run on one thread, runs handed out one at a time
    std::atomic<size_t> next{0};
    p.pool->Run([&](int, int) {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < runs.size();)
        attend(runs[i], nullptr);
    });
  } else {
    for (const ForwardBatch::SeqRun& r : runs) attend(r, p.pool);
  }
}

void LlamaModel::MlaAttention(const Pass& p, int32_t l, const float* xn, float* out) const {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  const int64_t n = p.n, nh = c.n_heads, hd = c.head_dim, rank = c.kv_lora_rank, rot = c.rot_dim,
                kd = c.mla_k_dim, nope = c.MlaNopeDim(), vd = c.mla_v_dim;
  float* qh = p.s.layer.Floats(kMlaQ, n * nh * kd);  // [n, n_heads, nope | rope]
  if (c.q_lora_rank > 0) {
    const int64_t ql = c.q_lora_rank;
    float* qa = p.s.layer.Floats(kMlaQa, n * ql);  // [n, q_lora]
    w.wq_a.Apply(xn, n, qa, p.pool);
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(qa + i * ql, w.q_a_norm.data(), qa + i * ql, ql, c.rms_eps);
    w.wq_b.Apply(qa, n, qh, p.pool);
  } else {
    w.wq.Apply(xn, n, qh, p.pool);
  }
  float* kv = p.s.layer.Floats(kMlaKv, n * hd);  // [n, kv_lora | rope]
  w.wkv_a.Apply(xn, n, kv, p.pool);
  float* q = p.s.layer.Floats(kQ, n * nh * hd);  // [n, n_heads, kv_lora | rope] what attention reads
  for (int64_t i = 0; i < n; ++i) {
    float *ki = kv + i * hd, *qi = q + i * nh * hd;
    kernels::RmsNorm(ki, w.kv_a_norm.data(), ki, rank, c.rms_eps);
    for (int64_t h = 0; h < nh; ++h) std::copy_n(qh + (i * nh + h) * kd + nope, rot, qi + h * hd + rank);
    // The rope parts sit at offset kv_lora of each row: Rope rotates the first rot of each.
    const float* cs = p.rope_cs + i * rot;  // [rot/2, 2]
    kernels::Rope(ki + rank, 1, static_cast<int>(hd), static_cast<int>(rot), cs, c.rope_neox);
    kernels::Rope(qi + rank, static_cast<int>(nh), static_cast<int>(hd), static_cast<int>(rot), cs,
                  c.rope_neox);
    const int32_t seq = p.b.seq_ids[static_cast<size_t>(i)], slot = p.slots[i];
    p.kv.StoreKey(l, seq, slot, ki);
    // V is the latent part of the same row: in it (KvCacheTypesFor's layout), or a copy beside it
    // for a cache made without that layout (attention then returns whole rows; the first kv_lora count).
    p.kv.StoreValue(l, seq, slot, ki);
  }
  // Per head: q_nope absorbed into the latent space (W_UK^T), later the latent output through
  // W_UV; the heads run in parallel, each one small matrix over the pass's tokens.
  const int64_t in_w = std::max(nope, rank), out_w = std::max(rank, vd);
  float* hin = p.s.layer.Floats(kMlaIn, nh * n * in_w);     // [n_heads, n, in_w]
  float* hout = p.s.layer.Floats(kMlaOut, nh * n * out_w);  // [n_heads, n, out_w]
  auto per_head = [&](auto&& body) {
    auto range = [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) body(h, hin + h * n * in_w, hout + h * n * out_w);
    };
    if (p.pool) {
      p.pool->ParallelFor(nh, range);
    } else {
      range(0, nh);
    }
  };
  per_head([&](int64_t h, float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(qh + (i * nh + h) * kd, nope, x + i * nope);
    w.wk_b[static_cast<size_t>(h)].Apply(x, n, y, nullptr);
    for (int64_t i = 0; i < n; ++i) std::copy_n(y + i * rank, rank, q + (i * nh + h) * hd);
  });
  AttentionBlock blk;
  blk.n_q = static_cast<int>(nh);
  blk.n_kv = 1;
  const int64_t aw = p.kv.types().ValueDim(c.head_dim);  // kv_lora, or whole rows without the layout
  float* attn = p.s.layer.Floats(kAttn, n * nh * aw);    // [n, n_heads, aw]; the first kv_lora count
  AttendRuns(p, l, blk, q, attn);
  float* av = p.s.layer.Floats(kMlaV, n * nh * vd);  // [n, n_heads v_dim]
  per_head([&](int64_t h, float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(attn + (i * nh + h) * aw, rank, x + i * rank);
    w.wv_b[static_cast<size_t>(h)].Apply(x, n, y, nullptr);
    for (int64_t i = 0; i < n; ++i) std::copy_n(y + i * vd, vd, av + i * nh * vd + h * vd);
  });
  w.wo.Apply(av, n, out, p.pool);
}

void LlamaModel::Ffn(const Pass& p, int32_t l, const float* xn, float* out) const {
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  const int64_t n = p.n, ffn = config_.ffn_dim;
  if (w.moe) {
    w.moe->Forward(xn, n, out, p.so.moe_capacity_factor, p.stats, p.s.ffn, p.pool);
    return;
  }
  if (sparse_ffn_ && p.so.UsesFfnSparsity()) {
    sparse_ffn_->Forward(l, {&w.w_gate, &w.w_up, &w.w_down, &w.w_gate_up}, p.so, xn, n, out, p.stats, p.s.ffn,
                         p.pool);
    return;
  }
  Tap(p, l, InputKind::kFfnIn, xn, config_.dim);
  float* gate = p.s.layer.Floats(kGate, n * ffn);  // [n, ffn] gate, then act(gate) * up
  // GeGLU (gemma; ggml's fp16 GELU table unless exact_gelu_) or SwiGLU
  auto* act = !config_.gelu_ffn ? &kernels::SiluMul
              : exact_gelu_     ? &kernels::GeluTanhMul
                                : &kernels::GeluFp16TableMul;
  if (w.w_gate_up.n_out > 0 && !p.taps) {
    float* gu = p.s.layer.Floats(kGateUp, n * 2 * ffn);  // [n, 2 * ffn]: gate | up per token
    w.w_gate_up.Apply(xn, n, gu, p.pool);
    for (int64_t i = 0; i < n; ++i) act(gu + i * 2 * ffn, gu + i * 2 * ffn + ffn, gate + i * ffn, ffn);
  } else {
    float* up = p.s.layer.Floats(kUp, n * ffn);  // [n, ffn]
    Apply(p, l, LinearKind::kGate, w.w_gate, xn, gate);
    Apply(p, l, LinearKind::kUp, w.w_up, xn, up);
    act(gate, up, gate, n * ffn);
  }
  Tap(p, l, InputKind::kFfnMid, gate, ffn);
  Apply(p, l, LinearKind::kDown, w.w_down, gate, out);  // [n, dim]
}

void LlamaModel::ResidualAdd(int64_t n, float* x, float* delta, const std::vector<float>& post_norm,
                             const std::vector<float>* next_norm, float* xn) const {
  const int64_t dim = config_.dim;
  if (!post_norm.empty())
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(delta + i * dim, post_norm.data(), delta + i * dim, dim, config_.rms_eps);
  if (next_norm && !next_norm->empty()) {
    for (int64_t i = 0; i < n; ++i)
      kernels::AddRmsNorm(x + i * dim, delta + i * dim, next_norm->data(), xn + i * dim, dim,
                          config_.rms_eps);
    return;
  }
  kernels::AddInPlace(x, delta, n * dim);
  if (next_norm) std::copy_n(x, n * dim, xn);
}

Status LlamaModel::Forward(const ForwardBatch& b, KvCache& kv, float* logits, ThreadPool* pool,
                           const ForwardOptions& options) const {
  FERRY_RETURN_IF_ERROR(CheckBatch(b, kv));
  const SparsityOptions& so = options.sparsity ? *options.sparsity : sparsity_;
  FERRY_RETURN_IF_ERROR(CheckRunOptions(options, so));
  const ModelConfig& c = config_;
  const int64_t n = b.size();
  if (n == 0) return Status::Ok();
  FERRY_RETURN_IF_ERROR(attn_sparsity_.BeginForward(so, kv, options.stats));
  FERRY_RETURN_IF_ERROR(kv.BeginForward(b));
  ForwardScratch own;  // only for callers that keep no scratch of their own
  ForwardScratch& s = options.scratch ? *options.scratch : own;
  // Where each token's K/V live: its position, unless a budgeted cache stores kept tokens densely.
  int32_t* slots = s.layer.Ints(kKvSlots, n);  // [n]
  int64_t sum_keys = 0;  // keys attended in this pass, over all queries (head-pruning counts)
  int32_t max_slot = 0;
  for (int64_t i = 0; i < n; ++i) {
    slots[i] = kv.Slot(b.seq_ids[static_cast<size_t>(i)], b.positions[static_cast<size_t>(i)]);
    sum_keys += slots[i] + 1;
    max_slot = std::max(max_slot, slots[i]);
  }
  // A sliding window counts positions back from the query: it needs every position in its
  // own slot (no budgeted cache) and no H2O scores (their kernel has no window).
  if (c.sliding_window > 0) {
    for (int64_t i = 0; i < n; ++i)
      if (slots[i] != b.positions[static_cast<size_t>(i)] || kv.AttentionWeightSums(0, b.seq_ids[0]))
        return InvalidArgumentError(
            "{} has sliding-window layers, which need a KV cache keeping every position (no --kv-budget)",
            c.arch);
  }
  b.SeqRuns(&s.runs);  // attention is one kernel call per sequence run
  // A decode batch is many one-query runs, each too small to be worth the pool inside the
  // kernel: spread the runs over the threads instead. Threads never change a row's bits, so
  // outputs are identical either way. Not when one run would dominate (its split across
  // threads is worth more), nor with sparse attention or H2O, which count into shared state.
  const bool spread_runs = pool && pool->size() > 1 && s.runs.size() > 1 &&
                           static_cast<int64_t>(s.runs.size()) == n &&
                           int64_t{max_slot + 1} * pool->size() <= sum_keys && !so.UsesSparseAttention() &&
                           !kv.AttentionWeightSums(0, b.seq_ids[0]);
  // LongRoPE (phi3): the long factors when the cache holds a longer context than the original
  // one, as llama.cpp decides by n_ctx_seq; the same for every token of the pass.
  // The angles once per token for every layer of the pass: [n, rot_dim/2, 2] per table.
  auto angles = [&](const RopeAngles& rope, int slot) {
    float* cs = s.layer.Floats(slot, n * c.rot_dim);
    for (int64_t i = 0; i < n; ++i) rope.Fill(b.positions[static_cast<size_t>(i)], cs + i * c.rot_dim);
    return cs;
  };
  const float* rope_cs = angles(c.UsesLongRopeFactors(kv.MaxSeqLen()) ? rope_long_ : rope_, kRope);
  const float* rope_cs_swa = c.HasSlidingLayers() ? angles(rope_swa_, kRopeSwa) : nullptr;
  const Pass p{b, n, kv, pool, so, options.stats, options.taps, s, slots, spread_runs, rope_cs, rope_cs_swa};
  const int64_t dim = c.dim;
  float* x = s.layer.Floats(kX, n * dim);      // [n, dim] residual stream
  float* xn = s.layer.Floats(kXn, n * dim);    // [n, dim] normalized
  float* tmp = s.layer.Floats(kTmp, n * dim);  // [n, dim] a block's output

  const int pp = par_.pp_rank(), n_stages = par_.pp_size();
  constexpr int kHiddenTag = 18;
  if (pp == 0) {
    EmbedTokens(b, x);
    if (c.embedding_scale != 0.0f) ScaleInPlace(x, n * dim, c.embedding_scale);  // granite
  } else {  // the previous stage's residual stream
    FERRY_RETURN_IF_ERROR(par_.pp->Recv(x, static_cast<size_t>(n * dim) * sizeof(float), pp - 1, kHiddenTag));
  }
  // Megatron: each rank's W_o / down output is a partial sum over its heads / FFN rows.
  auto reduce = [&](float* y) {
    return par_.tp_size() > 1 ? par_.tp->AllReduceSum(y, n * dim) : Status::Ok();
  };
  for (int32_t l = stage_.first; l < stage_.last; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    if (l == stage_.first) {  // later layers get their norm fused with the previous residual add
      if (w.attn_norm.empty()) std::copy_n(x, n * dim, xn);  // olmo2: attention reads x itself
      for (int64_t i = 0; i < n && !w.attn_norm.empty(); ++i)
        kernels::RmsNorm(x + i * dim, w.attn_norm.data(), xn + i * dim, dim, c.rms_eps);
    }
    Attention(p, l, xn, tmp);
    FERRY_RETURN_IF_ERROR(reduce(tmp));
    if (c.residual_scale != 0.0f) ScaleInPlace(tmp, n * dim, c.residual_scale);  // granite
    if (so.UsesHeadPruning() && options.stats)
      attn_sparsity_.CountHeadWork(c, l, n, sum_keys, *options.stats);
    ResidualAdd(n, x, tmp, w.attn_post_norm, &w.ffn_norm, xn);
    Ffn(p, l, xn, tmp);
    FERRY_RETURN_IF_ERROR(reduce(tmp));
    if (c.residual_scale != 0.0f) ScaleInPlace(tmp, n * dim, c.residual_scale);
    // The residual add fused with the next layer's attention norm; after the stage's last, add only.
    ResidualAdd(n, x, tmp, w.ffn_post_norm,
                l + 1 < stage_.last ? &layers_[static_cast<size_t>(l) + 1].attn_norm : nullptr, xn);
  }

  if (pp + 1 < n_stages) {  // hand the stream on; the last stage sends back the logits
    FERRY_RETURN_IF_ERROR(par_.pp->Send(x, static_cast<size_t>(n * dim) * sizeof(float), pp + 1, kHiddenTag));
    if (!options.defer_stage_logits)
      FERRY_RETURN_IF_ERROR(ShareStageLogits(b, logits, &s, options.logits_gathered_bytes));
    if (options.hidden) FERRY_RETURN_IF_ERROR(BroadcastHidden(n, options.hidden));
    kv.EndForward(b);
    return Status::Ok();
  }
  int32_t* top_k = p.s.layer.Ints(kRowTopK, n);  // [n_out] what each logits row needs
  // Final norm for every token when the hidden states are asked for (embeddings), else only
  // for the tokens whose logits are wanted; the head only for the latter.
  if (options.hidden)
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(x + i * dim, output_norm_.data(), options.hidden + i * dim, dim, c.rms_eps);
  int64_t n_out = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!b.want_logits[static_cast<size_t>(i)]) continue;
    top_k[n_out] = b.LogitsTopK(static_cast<size_t>(i));
    if (options.hidden)
      std::copy_n(options.hidden + i * dim, dim, xn + n_out * dim);
    else
      kernels::RmsNorm(x + i * dim, output_norm_.data(), xn + n_out * dim, dim, c.rms_eps);
    ++n_out;
  }
  if (n_out > 0) FERRY_RETURN_IF_ERROR(Head(p, xn, n_out, top_k, logits, options.logits_gathered_bytes));
  if (n_out > 0 && n_stages > 1 && !options.defer_stage_logits)
    FERRY_RETURN_IF_ERROR(BroadcastLogits(s, n_out, top_k, logits, options.logits_gathered_bytes));
  if (options.hidden && n_stages > 1) FERRY_RETURN_IF_ERROR(BroadcastHidden(n, options.hidden));
  kv.EndForward(b);
  return Status::Ok();
}

Status LlamaModel::ShareStageLogits(const ForwardBatch& b, float* logits, ForwardScratch* scratch,
                                    uint64_t* sent_bytes) const {
  if (par_.pp_size() == 1) return Status::Ok();
  ForwardScratch own;
  ForwardScratch& s = scratch ? *scratch : own;
  int32_t* top_k = s.layer.Ints(kRowTopK, b.size());  // [n_out] what each logits row needs
  int64_t n_out = 0;
  for (size_t i = 0; i < static_cast<size_t>(b.size()); ++i)
    if (b.want_logits[i]) top_k[n_out++] = b.LogitsTopK(i);
  return n_out > 0 ? BroadcastLogits(s, n_out, top_k, logits, sent_bytes) : Status::Ok();
}

Status LlamaModel::BroadcastLogits(ForwardScratch& s, int64_t n_out, const int32_t* top_k, float* logits,
                                   uint64_t* sent_bytes) const {
  const int root = par_.pp_size() - 1;
  const bool sender = par_.pp->rank() == root;
  const int64_t n_vocab = config_.n_vocab;
  const size_t row_bytes = static_cast<size_t>(n_vocab) * sizeof(float);
  if (std::all_of(top_k, top_k + n_out, [](int32_t k) { return k == 0; })) {  // logprobs, perplexity
    if (sent_bytes) *sent_bytes += static_cast<uint64_t>(n_out) * row_bytes;
    return par_.pp->Broadcast(logits, static_cast<size_t>(n_out) * row_bytes, root);
  }
  size_t bytes = 0;
  for (int64_t i = 0; i < n_out; ++i)
    bytes += top_k[i] == 0
                 ? row_bytes
                 : static_cast<size_t>(ShardCandidateCount(top_k[i], n_vocab)) * sizeof(LogitCandidate);
  uint8_t* msg = s.layer.Bytes(kLogitsSend, static_cast<int64_t>(bytes));  // rows in order
  uint8_t* at = msg;
  for (int64_t i = 0; i < n_out && sender; ++i) {
    if (top_k[i] == 0) {
      std::memcpy(at, logits + i * n_vocab, row_bytes);
      at += row_bytes;
    } else {
      ShardTopK(logits + i * n_vocab, n_vocab, 0, top_k[i], reinterpret_cast<LogitCandidate*>(at));
      at += static_cast<size_t>(ShardCandidateCount(top_k[i], n_vocab)) * sizeof(LogitCandidate);
    }
  }
  FERRY_RETURN_IF_ERROR(par_.pp->Broadcast(msg, bytes, root));
  if (sent_bytes) *sent_bytes += bytes;
  for (int64_t i = 0; i < n_out && !sender; ++i) {
    if (top_k[i] == 0) {
      std::memcpy(logits + i * n_vocab, at, row_bytes);
      at += row_bytes;
    } else {
      const size_t m = static_cast<size_t>(ShardCandidateCount(top_k[i], n_vocab));
      ScatterCandidates({reinterpret_cast<const LogitCandidate*>(at), m}, logits + i * n_vocab, n_vocab);
      at += m * sizeof(LogitCandidate);
    }
  }
  return Status::Ok();
}

void LlamaModel::FinishLogits(float* rows, int64_t n_rows, int64_t width) const {
  // granite divides the logits, as llama.cpp does: times the float reciprocal.
  if (config_.logit_scale != 0.0f) ScaleInPlace(rows, n_rows * width, 1.0f / config_.logit_scale);
  if (config_.final_softcap > 0.0f) kernels::SoftCap(rows, n_rows * width, config_.final_softcap);  // gemma
}

Status LlamaModel::Head(const Pass& p, const float* xn, int64_t n_out, const int32_t* top_k, float* logits,
                        uint64_t* gathered_bytes) const {
  const int n_ranks = par_.tp_size();
  if (n_ranks == 1) {
    output_.Apply(xn, n_out, logits, p.pool);
    FinishLogits(logits, n_out, config_.n_vocab);
    return Status::Ok();
  }
  // Every rank computes its vocabulary rows; what sampling needs of them is gathered to every
  // rank (rank 0 samples; so does every rank of run/bench, which keeps their token streams
  // identical): a whole row for a row with top_k 0, else the shard's top_k largest logits.
  const int64_t n_vocab = config_.n_vocab, nv = shard_.n_vocab;
  float* part = p.s.layer.Floats(kLogitsPart, n_out * nv);  // [n_out, this rank's vocab]
  output_.Apply(xn, n_out, part, p.pool);
  FinishLogits(part, n_out, nv);
  // A rank's message: its shard of every whole row, in row order, then its candidates of every
  // reduced row, in row order ([ShardCandidateCount(top_k, shard vocab)] each).
  auto message_bytes = [&](int64_t shard_vocab) {
    size_t bytes = 0;
    for (int64_t i = 0; i < n_out; ++i)
      bytes += top_k[i] == 0
                   ? static_cast<size_t>(shard_vocab) * sizeof(float)
                   : static_cast<size_t>(ShardCandidateCount(top_k[i], shard_vocab)) * sizeof(LogitCandidate);
    return bytes;
  };
  std::vector<size_t> counts;
  size_t total = 0;
  for (int r = 0; r < n_ranks; ++r) {
    counts.push_back(message_bytes(vocab_split_[r + 1] - vocab_split_[r]));
    total += counts.back();
  }
  const int rank = par_.tp_rank();
  const bool all_whole = std::all_of(top_k, top_k + n_out, [](int32_t k) { return k == 0; });
  // Only whole rows (logprobs, perplexity): the message is `part` as it is.
  uint8_t* send = all_whole
                      ? reinterpret_cast<uint8_t*>(part)
                      : p.s.layer.Bytes(kLogitsSend, static_cast<int64_t>(counts[static_cast<size_t>(rank)]));
  uint8_t* at = send;
  for (int64_t i = 0; i < n_out && !all_whole; ++i)
    if (top_k[i] == 0) {
      std::memcpy(at, part + i * nv, static_cast<size_t>(nv) * sizeof(float));
      at += static_cast<size_t>(nv) * sizeof(float);
    }
  for (int64_t i = 0; i < n_out; ++i)
    if (top_k[i] > 0) {
      LogitCandidate* c = reinterpret_cast<LogitCandidate*>(at);
      ShardTopK(part + i * nv, nv, shard_.vocab0, top_k[i], c);
      at += static_cast<size_t>(ShardCandidateCount(top_k[i], nv)) * sizeof(LogitCandidate);
    }
  uint8_t* all =
      p.s.layer.Bytes(kLogitsAll, static_cast<int64_t>(total));  // rank 0's message, then rank 1's, ...
  FERRY_RETURN_IF_ERROR(par_.tp->AllGatherV(send, counts, all));
  if (gathered_bytes) *gathered_bytes += total;
  // Unpack each rank's message in rank order: whole rows into place, candidates merged.
  std::vector<std::span<const LogitCandidate>> shards(static_cast<size_t>(n_ranks));
  std::vector<const uint8_t*> reduced(static_cast<size_t>(n_ranks));  // each rank's next candidates
  const uint8_t* msg = all;
  for (int r = 0; r < n_ranks; ++r) {
    const int64_t v0 = vocab_split_[r], rv = vocab_split_[r + 1] - v0;
    const uint8_t* q = msg;
    for (int64_t i = 0; i < n_out; ++i)
      if (top_k[i] == 0) {
        std::memcpy(logits + i * n_vocab + v0, q, static_cast<size_t>(rv) * sizeof(float));
        q += static_cast<size_t>(rv) * sizeof(float);
      }
    reduced[static_cast<size_t>(r)] = q;
    msg += counts[static_cast<size_t>(r)];
  }
  std::vector<LogitCandidate> merged;
  for (int64_t i = 0; i < n_out; ++i) {
    if (top_k[i] == 0) continue;
    for (int r = 0; r < n_ranks; ++r) {
      const size_t m =
          static_cast<size_t>(ShardCandidateCount(top_k[i], vocab_split_[r + 1] - vocab_split_[r]));
      const uint8_t*& q = reduced[static_cast<size_t>(r)];
      shards[static_cast<size_t>(r)] = {reinterpret_cast<const LogitCandidate*>(q), m};
      q += m * sizeof(LogitCandidate);
    }
    MergeShardCandidates(shards, top_k[i], &merged);
    ScatterCandidates(merged, logits + i * n_vocab, n_vocab);
  }
  return Status::Ok();
}
}  // namespace ferry::llama_internal
