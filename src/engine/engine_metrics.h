// Serving metrics: per-request latencies (queue time, TTFT, TPOT, inter-token latency,
// end-to-end) and engine-wide counters, plus percentile helpers for reports.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace ferry {

struct RequestMetrics {
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
  int32_t preemptions = 0;
  int64_t spec_draft_tokens = 0;     // drafted tokens verified (speculative decoding)
  int64_t spec_accepted_tokens = 0;  // ... of which were accepted
  double arrival_s = 0;  // on the engine clock
  double queue_s = 0;    // arrival -> first scheduled
  double ttft_s = 0;   // arrival -> first token
  double tpot_s = 0;   // mean time per output token after the first
  // Defined as ttft_s + tpot_s * (output_tokens - 1), which is arrival -> last token.
  double e2e_s = 0;
  std::vector<double> itl_s;  // [output_tokens - 1] gaps between consecutive tokens
};

RequestMetrics ComputeRequestMetrics(const Request& r);

// Engine-wide counters since start.
struct EngineStats {
  int32_t running = 0, waiting = 0;
  double kv_usage = 0;                 // fraction of blocks referenced now
  int32_t kv_blocks = 0, kv_free_blocks = 0;  // KV blocks in all / not referenced now
  // KV groups (model/kv_group_layout.h: 1 unless sliding-window blocks are freed), the bytes
  // of one block, and the blocks one decoding sequence of the engine's longest context holds.
  int32_t kv_groups = 1;
  int64_t kv_block_bytes = 0, kv_max_len_blocks = 0;
  int64_t steps = 0;
  int64_t micro_batches = 0;           // pieces the steps' batches ran as (one each unless pipelined)
  int64_t prompt_tokens = 0;           // prompt tokens of admitted requests (first admission)
  int64_t prefill_tokens_computed = 0; // tokens computed other than single-token decodes
  int64_t decode_tokens_computed = 0;
  int64_t output_tokens = 0;           // tokens emitted
  int64_t prefix_query_tokens = 0;     // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;       // ... of which were found (in the pool or a tier)
  // Prefix-cache tiers (--prefix-cache-ram / --prefix-cache-dir): bytes held now, blocks
  // restored from each tier, and disk files found damaged or foreign and deleted.
  int64_t prefix_cache_ram_bytes = 0, prefix_cache_disk_bytes = 0;
  int64_t prefix_cache_ram_hits = 0, prefix_cache_disk_hits = 0;
  int64_t prefix_cache_disk_rejected = 0;
  int64_t preemptions = 0;
  int64_t finished = 0, aborted = 0;
  double kv_waste_sum = 0;             // sum over steps of unused/allocated slots
  // KV budgets (--kv-policy): tokens evicted, the most blocks in use at any step, next to the
  // most that caches of every computed position would have held (unshared), and the most
  // sequences running at once.
  int64_t kv_evicted_tokens = 0;
  // Blocks of sliding-window KV groups given back as they left every query's window.
  int64_t kv_window_released_blocks = 0;
  int64_t kv_peak_blocks = 0, kv_peak_full_blocks = 0;
  int64_t peak_running = 0;
  int64_t running_sum = 0;  // sum over steps of the sequences running (mean: / steps)
  double MeanRunning() const { return steps ? static_cast<double>(running_sum) / steps : 0.0; }
  // Speculative decoding: verification passes (a request's step with >= 1 draft), drafts
  // verified and accepted, and wall time drafting and in target passes that verified drafts.
  int64_t spec_verifications = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  double spec_draft_s = 0, spec_verify_s = 0;
  double SpecAcceptanceRate() const {
    return spec_draft_tokens ? static_cast<double>(spec_accepted_tokens) / spec_draft_tokens : 0.0;
  }
  // Accepted drafts per verification (each verification also yields one token of its own).
  double SpecMeanAcceptedTokens() const {
    return spec_verifications ? static_cast<double>(spec_accepted_tokens) / spec_verifications : 0.0;
  }
  double PrefixHitRate() const {
    return prefix_query_tokens ? static_cast<double>(prefix_hit_tokens) / prefix_query_tokens : 0.0;
  }
  double KvWaste() const { return steps ? kv_waste_sum / steps : 0.0; }
};

// Percentile p in [0, 100] by linear interpolation; 0 for an empty set.
double Percentile(std::vector<double> values, double p);

}  // namespace ferry
