// Generator: single-sequence prefill + decode loop behind `ferry run` (the batched serving
// engine builds on the same Model/KvCache/Sampler pieces).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "model/kv_storage.h"
#include "sampling/sampler.h"

namespace ferry {

struct GenerateOptions {
  int32_t n_predict = 128;  // max new tokens; < 0: until end of generation or context full
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (never emitted, even partly)
  int32_t n_ctx = 0;              // 0: the model's training context, capped at 4096
  int32_t n_batch = 512;          // prompt tokens per forward call
  bool ignore_eos = false;
  KvCacheTypes kv_types;          // K/V storage types (--cache-type-k / --cache-type-v)
  // Run-time sparsity of this call; nullopt: the options the model was loaded with.
  std::optional<SparsityOptions> sparsity;
};

struct GenerateStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double ttft_s = 0;          // start -> first token sampled (prefill + first sample)
  double prefill_s = 0;       // prompt forward passes
  double decode_s = 0;        // after the first token
  std::string finish_reason;  // "stop" (eos or stop string) or "length"
  SparsityStats sparsity;     // work the model's sparsity options skipped
};

using TextSink = std::function<void(std::string_view)>;

// Generates from prompt ids, streaming text (whole UTF-8 characters) to `sink`.
// Generated ids go to `out_ids` when non-null.
StatusOr<GenerateStats> Generate(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& prompt,
                                 const GenerateOptions& options, const TextSink& sink,
                                 std::vector<int32_t>* out_ids = nullptr);

// The context size Generate will use.
int32_t EffectiveContext(const ModelConfig& config, int32_t requested);

}  // namespace ferry
