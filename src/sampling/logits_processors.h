// Per-request logit constraints of the OpenAI and vLLM APIs, applied to a row of logits before
// the penalties and the filter chain: logit_bias, allowed_token_ids, bad_words and min_tokens.
// Log-probabilities are reported from the raw logits, before these (vLLM's default).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ferry {

struct LogitsConstraints {
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit)
  std::vector<int32_t> allowed_token_ids;             // non-empty: every other token is banned
  // Token sequences never generated: the last token of each is banned whenever the generated
  // tokens end with the ones before it (a one-token word is always banned).
  std::vector<std::vector<int32_t>> bad_words;
  // While fewer than min_tokens tokens were generated, the tokens that would end the
  // generation (end-of-generation ids, stop_token_ids) are banned.
  int32_t min_tokens = 0;
  std::vector<int32_t> min_tokens_banned;

  bool empty() const {
    return logit_bias.empty() && allowed_token_ids.empty() && bad_words.empty() && min_tokens <= 0;
  }
};

// logits: [n_vocab], modified in place (banned tokens get -inf). generated: the tokens generated
// so far (the history past the prompt). Token ids outside [0, n_vocab) are skipped.
void ApplyLogitsConstraints(const LogitsConstraints& c, float* logits, int32_t n_vocab,
                            std::span<const int32_t> generated);

}  // namespace ferry
