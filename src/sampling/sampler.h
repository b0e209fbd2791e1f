// Sampler: turns a row of logits into a token id under per-request SamplingParams.
// Each request owns its Sampler (and RNG): same seed, same output.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "constraint/matcher.h"
#include "sampling/logits_processors.h"

namespace ferry {

struct SamplingParams {
  float temperature = 0.8f;     // 0 = greedy
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // llama.cpp style, over the last repeat_last_n tokens
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;  // OpenAI style
  float frequency_penalty = 0.0f;
  // history[0, prompt_tokens) is the prompt, which presence/frequency penalties skip: OpenAI and
  // vLLM count generated tokens only (a long system prompt must not penalize the answer).
  // 0: they count the whole window, as llama.cpp does. repeat_penalty always sees the prompt.
  int32_t prompt_tokens = 0;
  uint64_t seed = 0xFFFFFFFFu;  // LLAMA_DEFAULT_SEED meaning "random"; any other value is fixed
  // Structured output: tokens the grammar does not allow next get no probability (applied
  // before logit_bias, penalties, temperature and the filters). Shared by the requests that use it.
  std::shared_ptr<const constraint::CompiledGrammar> constraint;
  // A lazy constraint: it applies from just after the first generated token in this set (the
  // end of a reasoning block, a tool call's opener); until then the output is free. Empty:
  // from the first token. Rolling back past the trigger frees the output again.
  std::vector<int32_t> constraint_triggers;
  // logit_bias, allowed tokens, bad words, min_tokens (the API's; applied before the penalties,
  // over the tokens past prompt_tokens).
  LogitsConstraints constraints;
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Samples from logits [n_vocab] (modified in place by penalties/temperature).
  // history: tokens seen so far (prompt + generated) for the penalties.
  int32_t Sample(float* logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

  // The distribution Sample draws from, for speculative decoding (the target's p and the
  // draft's q must be built identically): penalties over `history`, then top-k, top-p, min-p
  // and temperature exactly as Sample. probs: [n_vocab], zero outside the kept tokens, sums
  // to 1; at temperature 0 it is one-hot on the greedy choice. logits are modified in place.
  void ProcessedProbs(float* logits, std::span<const int32_t> history, std::span<float> probs);
  // A token drawn from probs [n_vocab] (non-negative, need not be normalized; not all zero)
  // with this sampler's RNG.
  int32_t SampleFromProbs(std::span<const float> probs);
  // A uniform draw in [0, 1) from this sampler's RNG (speculative acceptance tests).
  double Uniform();
  bool greedy() const { return params_.temperature <= 0.0f; }
  // With a constraint: the matcher after the generated tokens of the last call's history.
  const constraint::Matcher* matcher() const { return matcher_ ? &*matcher_ : nullptr; }

 private:
  // Brings the matcher to `history` (the prompt is the history of the first call: what
  // follows it is generated). It rolls back over tokens that are no longer there (rejected
  // drafts) and advances over new ones, so every caller - decode, forks, speculative
  // drafting and verification, recompute after preemption - sees the right state without
  // telling the sampler. Then disallowed tokens' logits become -inf; after a token the
  // grammar refused (a rejected draft's successors), only the end tokens stay.
  void ApplyConstraint(float* logits, std::span<const int32_t> history);
  std::optional<constraint::Matcher> matcher_;
  bool overflow_reported_ = false;
  int64_t prompt_len_ = -1;
  std::vector<int32_t> consumed_;  // generated tokens the matcher has accepted
  size_t constrained_from_ = SIZE_MAX;  // lazy: where in the generated tokens the matcher starts
  std::vector<uint64_t> mask_;     // [ceil(n_vocab / 64)] scratch
  // Applies penalties and the filter chain; leaves the kept tokens in candidates_ and their
  // unnormalized tempered weights in weights_ (not called at temperature 0).
  void Filter(float* logits);
  SamplingParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // [n_vocab] scratch
  std::vector<double> weights_;                        // [candidates_.size()] scratch
};

// The most logits a split output head gathers per row instead of the whole row (a larger
// top_k gathers the row: its candidates would cost about as much).
constexpr int32_t kMaxGatheredTopK = 128;
// How many of a row's largest logits Sample needs to choose exactly as from the whole row
// (ForwardBatch::logits_top_k): 1 greedy, top_k for top-k sampling with top_k <= kMaxGatheredTopK
// (top-p, min-p and temperature act on those only); 0, the whole row, when a grammar, logit
// constraints or penalties can change which tokens are largest, or without such a top_k.
int32_t LogitsTopKNeeded(const SamplingParams& params);

// Index of the largest logit (first on ties), the greedy choice.
int32_t ArgMax(const float* logits, int32_t n);

}  // namespace ferry
