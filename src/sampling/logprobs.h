// Token log-probabilities for API responses: log-softmax over the raw model logits (before
// penalties, temperature and truncation), as vLLM and OpenAI report them by default.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// One sampled token's log-probability and the most likely alternatives at its position.
struct TokenLogprobs {
  float logprob = 0;              // of the sampled token
  int32_t rank = 0;               // its 1-based rank among all tokens (ties: lower id first)
  std::vector<TokenLogprob> top;  // [top_n] most likely tokens, descending (ties: lower id first)
};

// logits: [n_vocab] raw logits of one position. top_n is clamped to [0, n_vocab].
TokenLogprobs ComputeLogprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n);

}  // namespace ferry
