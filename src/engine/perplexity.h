// Perplexity exactly as llama.cpp's llama-perplexity computes it: non-overlapping windows of
// n_ctx tokens, the first replaced by BOS, the second half of each window scored.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "model/kv_storage.h"

namespace ferry {

struct PerplexityOptions {
  int32_t n_ctx = 512;
  int32_t n_batch = 2048;   // tokens per forward call (capped at n_ctx)
  int32_t max_chunks = -1;  // < 0: all
  KvCacheTypes kv_types;    // K/V storage types (--cache-type-k / --cache-type-v)
  // Called after each window: (windows done, total, running ppl).
  std::function<void(int32_t, int32_t, double)> progress;
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_stderr = 0;  // standard error of mean NLL propagated through exp
  int64_t n_scored = 0;
  int32_t n_chunks = 0;
};

// tokens: the whole text tokenized once with BOS (special tokens not parsed).
StatusOr<PerplexityResult> Perplexity(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& tokens,
                                      const PerplexityOptions& options);

}  // namespace ferry
