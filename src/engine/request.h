// Request: one sequence of the serving engine and its state machine
// (waiting -> running -> finished, running -> waiting again when preempted), with its own
// sampler, KV lease and timestamps. A request with n > 1 forks into n branches that share
// the prompt's KV blocks; each branch is a Request with the same id and its own branch index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/pooling.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_budget_policy.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "speculative/spec_state.h"

namespace ferry {

using RequestId = int64_t;

struct RequestOptions {
  SamplingParams sampling;
  int32_t max_tokens = 16;        // new tokens per branch
  std::vector<std::string> stop;  // stop strings (never emitted)
  bool ignore_eos = false;
  // Parallel sampling: n branches sharing the prompt's blocks. Branch i samples with seed
  // sampling.seed + i (a fixed seed), so it equals an independent request with that seed.
  int32_t n = 1;
  // Speculative decoding: draft tokens per step when the engine speculates (-1: the engine's
  // --spec-tokens, 0: this request does not speculate).
  int32_t spec_tokens = -1;
  // >= 0: report each sampled token's log-probability (raw logits) and this many top alternatives.
  int32_t logprobs = -1;
  // >= 0: the same for every prompt token after the first (completions' echo with logprobs,
  // vLLM's prompt_logprobs). Logits are then computed at every prompt position, so the request
  // does not reuse cached prefix blocks (their positions' logits were never computed).
  int32_t prompt_logprobs = -1;
  // Tokens that finish the branch like end-of-generation (not emitted), also with ignore_eos.
  std::vector<int32_t> stop_token_ids;
  bool include_stop_str_in_output = false;  // a matched stop string ends the text instead of being cut
  // false: special (control) tokens are written into the text, and with
  // spaces_between_special_tokens separated from their neighbours by a space (transformers').
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  // Not kNone: an embedding request. Its prompt is prefilled (no prefix-cache reuse: every
  // token's hidden state is pooled), nothing is sampled, and it finishes ("stop") with the
  // pooled, L2-normalized final hidden state; its blocks are freed, not cached.
  Pooling pooling = Pooling::kNone;
};

enum class RequestStatus { kWaiting, kRunning, kFinishedStop, kFinishedLength, kFinishedAbort };

inline bool IsFinished(RequestStatus s) {
  return s >= RequestStatus::kFinishedStop;
}
const char* FinishReason(RequestStatus s);  // "stop", "length", "abort" or ""

// Seconds on the engine's clock (0 = engine start).
struct RequestTimes {
  double arrival = 0;
  double first_scheduled = -1;
  double first_token = -1;
  double last_token = -1;
  std::vector<double> inter_token;  // gaps between consecutive emitted tokens
};

struct Request {
  Request(RequestId id_, int32_t branch_, std::vector<int32_t> prompt, RequestOptions opts, Sampler s)
      : id(id_), branch(branch_), tokens(std::move(prompt)), options(std::move(opts)), sampler(std::move(s)) {
    num_prompt_tokens = static_cast<int32_t>(tokens.size());
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output() const { return num_tokens() - num_prompt_tokens; }
  // Tokens still to compute before the next sample (prefill, a chunk of it, or one decode).
  int32_t num_pending() const { return num_tokens() - num_computed; }

  RequestId id;
  int32_t branch = 0;
  std::vector<int32_t> tokens;  // [num_tokens] prompt, then generated
  int32_t num_prompt_tokens = 0;
  int32_t num_computed = 0;  // tokens whose K/V are in the cache
  RequestStatus status = RequestStatus::kWaiting;
  RequestOptions options;
  Sampler sampler;
  std::vector<Sampler> fork_samplers;  // branches 1..n-1 until the fork at the first sample
  kv::KvSequence kv;                   // block lease: returned on preemption/finish/destruction
  KeptTokens kept;                     // with a KV budget: the tokens its blocks hold, by slot
  RequestTimes times;
  int32_t num_cached_prompt_tokens = -1;  // prefix-cache hit at first admission
  int32_t num_preemptions = 0;
  PooledState pooled;            // embedding requests: the prompt's hidden states so far
  std::vector<float> embedding;  // [dim] embedding requests, once the prompt is computed
  bool embeds() const { return options.pooling != Pooling::kNone; }
  // Nothing is sampled: an embedding, or a prompt scored with max_tokens 0 (finishes "length").
  bool prefill_only() const { return embeds() || options.max_tokens == 0; }
  // [num_prompt_tokens - 1] with options.prompt_logprobs >= 0: entry p scores prompt token p + 1
  // (from the logits at position p). Handed to the branch's first output, then empty.
  std::vector<TokenLogprobs> prompt_logprobs;
  bool wants_prompt_logprobs() const { return options.prompt_logprobs >= 0 && num_output() == 0; }
  spec::SpecState spec;  // drafts of this step, adaptive K, the proposer's state (draft KV lease)
};

}  // namespace ferry
