// SparsityOptions: the run-time switches that make a model skip work (MoE capacity, KV
// budgets), and SparsityStats: what was skipped, counted so figures can show it next to the
// quality it cost. The defaults are exact: nothing dropped, nothing evicted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

enum class KvPolicy {
  kFull,  // keep every token
  kSink,  // StreamingLLM: the first sink_tokens + the most recent ones
  kH2O,   // Heavy-Hitter Oracle: sinks + a recent window + the most attended tokens
};
const char* KvPolicyName(KvPolicy p);

struct SparsityOptions {
  // MoE: expert capacity = ceil(k * F * tokens_in_step / n_experts); assignments past it are
  // dropped for that expert (their share of the FFN output is 0, the residual passes). 0: off.
  // Dropping depends on what else is in the step, so it is not batch-invariant.
  double moe_capacity_factor = 0;

  // KV budget per sequence (model/kv_budget_cache.h): kv_budget tokens kept between forward
  // passes (0: no limit). recent_window < 0: sink keeps budget - sinks recent tokens, h2o half
  // of that (the rest are heavy hitters).
  KvPolicy kv_policy = KvPolicy::kFull;
  int32_t kv_budget = 0;
  int32_t sink_tokens = 4;
  int32_t recent_window = -1;

  // ---- Attention sparsity (model/attention_sparsity.h, docs/sparsity.md) ----
  // Head pruning: the least important prune_heads fraction of each layer's heads (ranked by
  // head_importance, a `ferry calibrate` STATS file) is dropped: no Q rows, attention or W_o
  // columns for them; a KV head goes when all its query heads do. 0: off.
  double prune_heads = 0;
  std::string head_importance;
  // Value-fetch skipping: V rows whose softmax weight is below this (for every head of the KV
  // group) are not read. 0: off.
  float attn_skip_threshold = 0.f;
  // Progressive precision: scores from an INT8 copy of K, recomputed in f32 for keys within
  // attn_progressive_margin (logits) of the max.
  bool attn_progressive = false;
  float attn_progressive_margin = 4.f;

  // Contextual FFN sparsity (model/sparse_ffn.h): the fraction of FFN neurons skipped per
  // token. Threshold mode (CATS/TEAL): ffn_sparsity > 0 with per-layer |SiLU(gate)|
  // thresholds from ffn_stats (a `ferry sparsify` sidecar). Predictor mode (DejaVu):
  // ffn_predictor names the sidecar whose low-rank predictors choose the neurons; there
  // ffn_sparsity 0 means the sparsity the predictor was trained for. 0 and no predictor: off.
  double ffn_sparsity = 0;
  std::string ffn_stats;      // sidecar for threshold mode
  std::string ffn_predictor;  // sidecar for predictor mode

  bool UsesKvBudget() const { return kv_policy != KvPolicy::kFull && kv_budget > 0; }
  bool UsesHeadPruning() const { return prune_heads > 0; }
  bool UsesSparseAttention() const {
    return UsesHeadPruning() || attn_skip_threshold > 0 || attn_progressive;
  }
  bool UsesFfnSparsity() const { return ffn_sparsity > 0 || !ffn_predictor.empty(); }
  bool Exact() const { return moe_capacity_factor <= 0 && OnlyMoeCapacity(); }
  // Nothing set but (maybe) the MoE capacity factor, which changes only the expert FFN: what a
  // model split over ranks and MLA attention run with (the drops follow the routing, which
  // every rank computes whole and alike; the other options act on attention, KV or dense FFNs).
  bool OnlyMoeCapacity() const { return !UsesKvBudget() && !UsesSparseAttention() && !UsesFfnSparsity(); }
};

struct SparsityStats {
  // MoE, summed over layers and forward calls: [n_expert] token->expert assignments routed to
  // each expert (load) and how many of those the capacity dropped.
  std::vector<int64_t> expert_load, expert_dropped;
  int64_t moe_assignments = 0, moe_dropped = 0;
  // KV budget: tokens evicted and the most KV blocks any sequence held ([bytes] = blocks x
  // block bytes), next to what a full cache of the same positions would hold.
  int64_t kv_evicted_tokens = 0;
  int64_t kv_peak_bytes = 0, kv_full_bytes = 0;
  // FFN sparsity, summed over layers and tokens: neurons of dense FFNs (tokens x ffn per
  // layer) and how many of them were skipped; tokens that ran the row-sparse kernels (the
  // rest ran dense with the mask applied, e.g. prefill).
  int64_t ffn_neurons = 0, ffn_skipped = 0, ffn_sparse_tokens = 0, ffn_tokens = 0;

  // Attention (summed over layers and forward calls). Head pruning: heads of the plan, and the
  // work a dense pass would do in q/k/v/o projections + attention, next to what was skipped.
  int64_t heads_pruned = 0, heads_total = 0, kv_heads_pruned = 0, kv_heads_total = 0;  // over all layers
  int64_t prune_flops = 0, prune_flops_skipped = 0;                // attention-block FLOPs
  int64_t prune_weight_bytes = 0, prune_weight_bytes_skipped = 0;  // q/k/v/o weight bytes streamed
  // Value skipping / progressive precision: bytes a dense pass reads and what was (not) read.
  int64_t attn_v_bytes = 0, attn_v_bytes_skipped = 0;
  int64_t attn_k_rows = 0, attn_k_rows_f32 = 0;  // K rows scored / re-read in f32
  int64_t attn_k_bytes_dense = 0, attn_k_bytes_read = 0;

  double MoeDropRate() const {
    return moe_assignments > 0 ? static_cast<double>(moe_dropped) / static_cast<double>(moe_assignments)
                               : 0.0;
  }
  double FfnSkippedFraction() const {
    return ffn_neurons > 0 ? static_cast<double>(ffn_skipped) / static_cast<double>(ffn_neurons) : 0.0;
  }
};

}  // namespace ferry
