// SparseAttention: the model side of attention sparsity (docs/sparsity.md): head pruning
// (--prune-heads: sliced q/k/v rows and W_o columns of the kept heads, attention over the kept
// heads only), value-fetch skipping (--attn-skip-threshold) and progressive precision
// (--attn-progressive: an INT8 key copy kept in the KV cache). The kernels are
// kernels::AttentionSparse; what they skip is counted in SparsityStats.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/model_config.h"
#include "model/sparsity_options.h"

namespace ferry {

// One layer's attention weights as the model holds them (biases empty when absent).
struct AttentionWeightsRef {
  const Linear *wq, *wk, *wv, *wo;  // [q_dim, dim], [kv_dim, dim] x2, [dim, q_dim]
  const std::vector<float>*bq, *bk, *bv;
};

// Per-layer per-head importance ([n_layers][n_heads]) from a `ferry calibrate` STATS file
// (tensors blk.L.attn_heads.importance). Errors name the file and say how to make one.
StatusOr<std::vector<std::vector<float>>> LoadHeadImportance(const std::string& path, int32_t n_layers,
                                                             int32_t n_heads);

// The heads each layer keeps when its round(fraction * n_heads) least important ones are
// dropped (per layer: importance compares heads within a layer, not across; ties: lower head
// dropped first); every layer keeps at least its most important head. kept[l] is sorted.
std::vector<std::vector<int32_t>> SelectKeptHeads(const std::vector<std::vector<float>>& importance,
                                                  double fraction);

class SparseAttention {
 public:
  // Builds the pruned weights when `o` asks for head pruning (rebuilt only when the fraction or
  // the importance file change; dropped when pruning is off). `layers`: one per model layer.
  Status Configure(const SparsityOptions& o, const ModelConfig& c,
                   const std::vector<AttentionWeightsRef>& layers);

  // Before a forward pass: enables the cache's INT8 key copy under --attn-progressive and
  // records the pruning plan's head counts in `stats`.
  Status BeginForward(const SparsityOptions& o, KvCache& kv, SparsityStats& stats) const;

  // Writes the INT8 copy of a token's key rows k: [n_kv_heads, head_dim] when the cache keeps one.
  static void CopyKeyInt8(KvCache& kv, int32_t layer, int32_t seq, int32_t slot, const float* k,
                          int n_kv_heads, int head_dim);

  // Attention of one sequence run with every head: q: [n_q, n_heads, head_dim] -> out (same
  // shape). The dense kernel unless value skipping or progressive precision is on.
  void Attend(const SparsityOptions& o, const ModelConfig& c, const float* q, int n_q, const int32_t* slots,
              const kernels::KvBlocks& kv, float* out, SparsityStats& stats, ThreadPool* pool) const;

  // Whether layer l has pruned heads; then ForwardPrunedLayer is its whole attention block.
  bool IsPruned(int32_t l) const {
    return l < static_cast<int32_t>(pruned_.size()) && pruned_[static_cast<size_t>(l)] != nullptr;
  }
  // xn: [n, dim] normed input -> y: [n, dim] = W_o(attention of the kept heads); writes the kept
  // KV heads' K/V (and INT8 copy) of every token at slots[i]. inv_freq: the model's RoPE table.
  void ForwardPrunedLayer(const SparsityOptions& o, const ModelConfig& c, int32_t l, const float* xn,
                          const ForwardBatch& b, const int32_t* slots, const float* inv_freq, KvCache& kv,
                          float* y, SparsityStats& stats, ThreadPool* pool);

  // Head-pruning work of layer l for one pass of n_tok tokens attending sum_keys keys in all:
  // what a dense pass does and what the plan skips (FLOPs, weight bytes), added to stats.
  void CountHeadWork(const ModelConfig& c, int32_t l, int64_t n_tok, int64_t sum_keys,
                     SparsityStats& stats) const;

 private:
  struct PrunedLayer {
    std::vector<int32_t> kept;                          // [kq] kept query heads
    std::vector<int32_t> head_kv;                       // [kq] their KV heads
    std::vector<int32_t> kept_kv;                       // [kkv] KV heads still read
    Linear wqkv;                                        // [(kq + 2 kkv) * head_dim, dim] kept q | k | v rows
    Linear wo;                                          // [dim, kq * head_dim] kept columns
    std::vector<float> bias;                            // [(kq + 2 kkv) * head_dim] or empty
    std::vector<std::shared_ptr<AlignedBuffer>> owned;  // storage of the sliced weights
  };
  StatusOr<std::unique_ptr<PrunedLayer>> BuildLayer(const ModelConfig& c, int32_t l,
                                                    const AttentionWeightsRef& w, std::vector<int32_t> kept,
                                                    ThreadPool* pool) const;

  double built_fraction_ = 0;
  std::string built_file_;
  std::vector<std::unique_ptr<PrunedLayer>> pruned_;  // [n_layers], null when the layer keeps all heads
  int64_t heads_pruned_ = 0, kv_heads_pruned_ = 0;
  std::vector<int64_t> dense_bytes_;   // [n_layers] q/k/v/o weight bytes of each unpruned layer
  std::vector<float> qkv_, q_, attn_;  // scratch: [n, (kq + 2 kkv) hd], [n, kq hd], [n, kq hd]
};

}  // namespace ferry
