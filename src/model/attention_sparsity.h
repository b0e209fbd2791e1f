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
  // The kept heads of a pruned layer: their stacked q/k/v rows and W_o columns. The model runs
  // them through its one attention path (model/llama.cc) with these head maps.
  struct PrunedLayer {
    std::vector<int32_t> kept;                          // [kq] kept query heads
    std::vector<int32_t> head_kv;                       // [kq] their KV heads
    std::vector<int32_t> kept_kv;                       // [kkv] KV heads still read
    Linear wqkv;                                        // [(kq + 2 kkv) * head_dim, dim] kept q | k | v rows
    Linear wo;                                          // [dim, kq * head_dim] kept columns
    std::vector<float> bias;                            // [(kq + 2 kkv) * head_dim] or empty
    std::vector<std::shared_ptr<AlignedBuffer>> owned;  // storage of the sliced weights
  };

  // At load: builds the pruned weights when `o` asks for head pruning. `layers`: one per
  // model layer. The result never changes afterwards (the model is immutable after load).
  Status Configure(const SparsityOptions& o, const ModelConfig& c,
                   const std::vector<AttentionWeightsRef>& layers);

  // Whether a forward pass may run with `o`: its values are in range and its head pruning is
  // the one built at load (the fraction and the importance file).
  Status CheckRunOptions(const SparsityOptions& o) const;

  // Before a forward pass: enables the cache's INT8 key copy under --attn-progressive and
  // records the pruning plan's head counts in `stats` (when non-null).
  Status BeginForward(const SparsityOptions& o, KvCache& kv, SparsityStats* stats) const;

  // Writes the INT8 copy of a token's key rows k: [n_kv_heads, head_dim] when the cache keeps one.
  static void CopyKeyInt8(KvCache& kv, int32_t layer, int32_t seq, int32_t slot, const float* k,
                          int n_kv_heads, int head_dim);

  // Attention of one sequence run over n_heads query heads: q: [n_q, n_heads, head_dim] -> out
  // (same shape). head_kv: [n_heads] the cache KV head of each query head (pruned layers), or
  // null for every head with GQA's grouping. The dense kernel unless a head map, value skipping
  // or progressive precision asks for the sparse one.
  void Attend(const SparsityOptions& o, const ModelConfig& c, const float* q, int n_q, int n_heads,
              const int32_t* head_kv, const int32_t* slots, const kernels::KvBlocks& kv, float* out,
              SparsityStats* stats, ThreadPool* pool, const kernels::AttentionVariant& variant = {}) const;

  // Layer l's kept heads, or null when the layer keeps them all.
  const PrunedLayer* Pruned(int32_t l) const {
    return l < static_cast<int32_t>(pruned_.size()) ? pruned_[static_cast<size_t>(l)].get() : nullptr;
  }

  // Head-pruning work of layer l for one pass of n_tok tokens attending sum_keys keys in all:
  // what a dense pass does and what the plan skips (FLOPs, weight bytes), added to stats.
  void CountHeadWork(const ModelConfig& c, int32_t l, int64_t n_tok, int64_t sum_keys,
                     SparsityStats& stats) const;

 private:
  StatusOr<std::unique_ptr<PrunedLayer>> BuildLayer(const ModelConfig& c, int32_t l,
                                                    const AttentionWeightsRef& w, std::vector<int32_t> kept,
                                                    ThreadPool* pool) const;

  double built_fraction_ = 0;
  std::string built_file_;
  std::vector<std::unique_ptr<PrunedLayer>> pruned_;  // [n_layers], null when the layer keeps all heads
  int64_t heads_pruned_ = 0, kv_heads_pruned_ = 0;
  std::vector<int64_t> dense_bytes_;  // [n_layers] q/k/v/o weight bytes of each unpruned layer
};

}  // namespace ferry
