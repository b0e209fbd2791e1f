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
  // Offline tools (quant previews): the model runs with these activation taps.
  const ActivationTaps* taps = nullptr;
  // Sees every scored row in order: logits [n_rows, n_vocab] (f32, as computed) and the tokens
  // they predict (--kl-divergence-base writes or compares them).
  std::function<Status(const float* logits, int32_t n_rows, const int32_t* targets)> on_scored_rows;
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_stderr = 0;  // standard error of mean NLL propagated through exp
  int64_t n_scored = 0;
  int32_t n_chunks = 0;
  SparsityStats sparsity;  // work the model's sparsity options skipped
};

// tokens: the whole text tokenized once with BOS (special tokens not parsed). bos: the token
// that replaces each window's first one, or < 0 to keep it.
StatusOr<PerplexityResult> Perplexity(const Model& model, int32_t bos, ThreadPool& pool,
                                      const std::vector<int32_t>& tokens, const PerplexityOptions& options);
// The same with the BOS of lm's tokenizer when it adds one.
StatusOr<PerplexityResult> Perplexity(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& tokens,
                                      const PerplexityOptions& options);

}  // namespace ferry
