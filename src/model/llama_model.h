// The LLaMA-family model's class and its per-layer weights, shared by its two halves: loading
// (llama_load.cc: tensor names, shape checks, sharding, RoPE tables) and the forward pass
// (llama.cc). Private to src/model; everything else reaches the model through llama.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/aligned_buffer.h"
#include "model/attention_sparsity.h"
#include "model/linear.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/rope_angles.h"
#include "model/sparse_ffn.h"

namespace ferry::llama_internal {

// One layer's weights as loaded: this tensor rank's share of the heads and FFN rows, packed
// where the kernels repack.
struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;            // [dim]; empty without pre norms (olmo2)
  std::vector<float> attn_post_norm, ffn_post_norm;  // [dim] (cfg.post_norms), else empty
  Linear wq, wk, wv, wo;                             // [q_dim, dim], [kv_dim, dim] x2, [dim, q_dim]
  std::vector<float> bq, bk, bv;                     // [q_dim], [kv_dim], [kv_dim] (qwen2, gpt-oss)
  std::vector<float> bo;                             // [dim] W_o's bias (gpt-oss), else empty
  std::vector<float> sinks;                          // [n_heads] attention sink logits (gpt-oss), else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] each (qwen3: cfg.qk_norm); olmo2: [q_dim], [kv_dim]
  Linear w_gate, w_up, w_down;        // [ffn, dim] x2, [dim, ffn]
  Linear wqkv, w_gate_up;             // stacked q|k|v, gate|up rows (linear.h StackRows); n_out 0 if not
  std::unique_ptr<MoeFfn> moe;        // MoE models: replaces w_gate/w_up/w_down
  // deepseek2's MLA (cfg.IsMla(); then wq/wk/wv are unused but for wq without q_lora_rank):
  Linear wq_a, wq_b;                       // [q_lora, dim], [n_heads mla_k_dim, q_lora] (q_lora_rank > 0)
  std::vector<float> q_a_norm, kv_a_norm;  // [q_lora], [kv_lora]
  Linear wkv_a;                            // [kv_lora + rot, dim]: compressed KV | shared k_pe
  std::vector<Linear> wk_b, wv_b;          // [n_heads] x [kv_lora, nope] (W_UK^T), [v_dim, kv_lora] (W_UV)
};

// The projections of one layer's attention block as the forward pass runs them: the dense
// layer, or the kept heads of a pruned one (SparseAttention). Bias, RoPE, the KV write,
// attention and W_o are one code path for both.
struct AttentionBlock {
  const Linear* wqkv = nullptr;  // stacked q|k|v rows, or null: wq, wk, wv apart
  const Linear *wq = nullptr, *wk = nullptr, *wv = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // [n_q hd], [n_kv hd] x2, or null
  const float *q_norm = nullptr, *k_norm = nullptr;         // [hd] each, shared by the heads, or null
  bool qk_norm_whole = false;                               // olmo2: q_norm [n_q hd], k_norm [n_kv hd]
  const Linear* wo = nullptr;                               // [dim, n_q hd]
  int n_q = 0, n_kv = 0;                                    // heads computed
  const int32_t* kv_heads = nullptr;  // [n_kv] cache KV head of each computed one; null: all, in order
  const int32_t* head_kv = nullptr;   // [n_q] cache KV head each query head reads; null: GQA grouping
};

class LlamaModel final : public Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                               const ModelOptions& options);

  Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool,
                 const ForwardOptions& options) const override;
  bool WritesHidden() const override { return true; }
  size_t WeightBytes() const override { return weight_bytes_; }
  int pipeline_stages() const override { return par_.pp_size(); }
  StageLayers stage_layers() const override { return stage_; }
  Status ShareStageLogits(const ForwardBatch& batch, float* logits, ForwardScratch* scratch,
                          uint64_t* sent_bytes) const override;

 private:
  // What every step of one forward call reads.
  struct Pass {
    const ForwardBatch& b;
    int64_t n;  // tokens
    KvCache& kv;
    ThreadPool* pool;
    const SparsityOptions& so;
    SparsityStats* stats;        // null: not counted
    const ActivationTaps* taps;  // null: none (fused projections allowed)
    ForwardScratch& s;
    const int32_t* slots;      // [n] where each token's K/V live
    bool spread_runs;          // decode batch: one run per thread (see Forward)
    const float* rope_cs;      // [n, rot_dim/2, 2] each token's RoPE cos and sin (global layers)
    const float* rope_cs_swa;  // [n, rot_dim/2, 2] the same for sliding-window layers, or null
  };

  Status CheckBatch(const ForwardBatch& batch, const KvCache& kv) const;
  Status CheckRunOptions(const ForwardOptions& options, const SparsityOptions& so) const;
  std::vector<AttentionWeightsRef> AttentionRefs() const;
  void EmbedTokens(const ForwardBatch& batch, float* x) const;

  AttentionBlock BlockOf(int32_t l) const;
  // y: [n, n_out] = linear(x), through the activation taps' act_quant when there is one.
  void Apply(const Pass& p, int32_t l, LinearKind kind, const Linear& w, const float* x, float* y) const;
  void Tap(const Pass& p, int32_t l, InputKind input, const float* x, int64_t n_in) const;
  // xn: [n, dim] -> out: [n, dim] = W_o(attention(q, K, V)); appends the tokens' K/V.
  void Attention(const Pass& p, int32_t l, const float* xn, float* out) const;
  // The same for deepseek2's multi-head latent attention (ModelConfig::IsMla).
  void MlaAttention(const Pass& p, int32_t l, const float* xn, float* out) const;
  // attn: [n, n_heads, value dims] = attention of q: [n, n_heads, head_dim] over layer l's cache
  // (value dims: head_dim, or KvCacheTypes::v_in_k of a latent cache),
  // one kernel call per sequence run (spread over the threads for decode batches).
  void AttendRuns(const Pass& p, int32_t l, const AttentionBlock& blk, const float* q, float* attn) const;
  // One token's rotated k and its v ([n_kv, head_dim] each) into the cache at its slot.
  void WriteKv(const Pass& p, int32_t l, const AttentionBlock& blk, int64_t i, const float* k,
               const float* v) const;
  // xn: [n, dim] -> out: [n, dim]: dense, MoE or contextual-sparse FFN.
  void Ffn(const Pass& p, int32_t l, const float* xn, float* out) const;
  // x: [n, dim] += post_norm(delta) (delta itself without a post norm; delta is overwritten),
  // then xn: [n, dim] = next_norm(x), or a copy of x when next_norm is empty (olmo2); with
  // next_norm null, the add only.
  void ResidualAdd(int64_t n, float* x, float* delta, const std::vector<float>& post_norm,
                   const std::vector<float>* next_norm, float* xn) const;
  // xn: [n_out, dim] -> logits: [n_out, n_vocab] on every rank. Vocabulary split: row i is
  // gathered whole when top_k[i] is 0, else only its top_k[i] largest (the rest -inf); the
  // gathered bytes are added to *gathered_bytes (when not null).
  Status Head(const Pass& p, const float* xn, int64_t n_out, const int32_t* top_k, float* logits,
              uint64_t* gathered_bytes) const;
  // Pipeline: the last stage sends every stage the n_out logits rows [n_out, n_vocab], each as
  // Head left it: whole when top_k[i] is 0, else only its top_k[i] largest as (logit, token)
  // pairs, scattered on arrival (the rest -inf). Bytes sent are added to *sent_bytes.
  Status BroadcastLogits(ForwardScratch& s, int64_t n_out, const int32_t* top_k, float* logits,
                         uint64_t* sent_bytes) const;
  // Pipeline: the last stage sends every stage the final hidden states hidden: [n, dim]
  // (embeddings), after the logits.
  Status BroadcastHidden(int64_t n, float* hidden) const {
    return par_.pp->Broadcast(hidden, static_cast<size_t>(n * config_.dim) * sizeof(float),
                              par_.pp_size() - 1);
  }
  // The element-wise end of the head on rows [n_rows, width]: granite's logit scale, gemma's
  // soft cap (before any shard picks its largest logits, so that they are the final values).
  void FinishLogits(float* rows, int64_t n_rows, int64_t width) const;

  Linear token_embd_;               // [n_vocab, dim]
  Linear output_;                   // [n_vocab, dim] (= token_embd_ when tied)
  std::vector<float> output_norm_;  // [dim]
  std::vector<LayerWeights> layers_;
  RopeAngles rope_;       // RoPE angles, scaling applied
  RopeAngles rope_long_;  // the same with LongRoPE's long factors (phi3)
  RopeAngles rope_swa_;   // the same for sliding-window layers (gemma)
  size_t weight_bytes_ = 0;
  SparseAttention attn_sparsity_;  // pruned heads (built at load), value skipping, progressive precision
  std::unique_ptr<SparseFfn> sparse_ffn_;  // contextual FFN sparsity when asked for at load
  ParallelLayout par_;                     // how the model is split over processes (none by default)
  bool exact_gelu_ = false;                // ModelOptions::exact_gelu
  TensorShard shard_;                      // this tensor rank's heads, FFN rows and vocabulary rows
  StageLayers stage_;                      // this pipeline stage's layers
  std::vector<int64_t> vocab_split_;       // [tp_size + 1] first vocabulary row of each tensor rank
  std::vector<std::shared_ptr<AlignedBuffer>> slices_;  // the column slices' bytes (W_o, down)
};

}  // namespace ferry::llama_internal
