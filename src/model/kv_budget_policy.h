// KV budget policy: which tokens a sequence keeps when it holds more than its budget
// (StreamingLLM sinks + recent window, or H2O heavy hitters + recent window), as bookkeeping
// over the kept tokens' positions and scores. The caches that store K/V (BudgetKvCache for the
// single-sequence paths, the serving engine's PagedKvCache) apply the row moves it returns, so
// the selection and the compaction order exist once.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "model/sparsity_options.h"

namespace ferry {

struct KvBudgetConfig {
  KvPolicy policy = KvPolicy::kSink;
  int32_t budget = 0;          // tokens kept per sequence after each eviction
  int32_t sink_tokens = 4;     // positions 0..sink_tokens-1 are never evicted
  int32_t recent_window = -1;  // the newest tokens never evicted; < 0: see SparsityOptions
  int32_t block_size = 64;     // BudgetKvCache only (the serving engine uses its own blocks);
                               // any size gives the contiguous cache's bits while nothing is
                               // evicted: the attention kernel's tiles ignore block boundaries
  // The recent window and heavy-hitter count this config resolves to.
  int32_t Recent() const;
  int32_t Heavy() const;
  // A one-line error naming the flag when the config cannot work.
  Status Validate() const;
};

// The budget the sparsity options ask for: nullopt for --kv-policy full; an error when
// --kv-policy and --kv-budget come without each other or do not fit together.
StatusOr<std::optional<KvBudgetConfig>> KvBudgetFromOptions(const SparsityOptions& o);

// The tokens one sequence keeps, by cache slot (kept tokens are dense in slots 0..size()-1).
struct KeptTokens {
  std::vector<int32_t> pos;  // [size()] original position of each slot (keys keep its RoPE)
  std::vector<float> score;  // [size()] accumulated attention weight (H2O), 0 otherwise

  int32_t size() const { return static_cast<int32_t>(pos.size()); }
  // Appends slots for positions [p0, p0 + len) with score 0.
  void Append(int32_t p0, int32_t len);
  void Clear() {
    pos.clear();
    score.clear();
  }
};

// Move the K/V rows of slot `from` to slot `to` (in the order returned).
struct SlotMove {
  int32_t from, to;
};

// When `kept` holds more than the budget: keeps the sinks, the recent window (positions >=
// next_pos - Recent()) and, for H2O, the Heavy() highest-scored of the rest (equal scores: the
// newer token); compacts `kept` to the new size by moving the last kept slots into the holes
// below it, and returns those moves for the caller's K/V rows. No-op (no moves) within budget.
std::vector<SlotMove> EvictOverBudget(KeptTokens& kept, int32_t next_pos, const KvBudgetConfig& config);

}  // namespace ferry
