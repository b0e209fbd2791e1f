#include "sampling/logits_processors.h"

#include <algorithm>
#include <limits>

namespace ferry {

void ApplyLogitsConstraints(const LogitsConstraints& c, float* logits, int32_t n_vocab,
                            std::span<const int32_t> generated) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  auto valid = [&](int32_t t) { return t >= 0 && t < n_vocab; };
  if (!c.allowed_token_ids.empty()) {
    std::vector<bool> allowed(static_cast<size_t>(n_vocab), false);  // [n_vocab]
    for (int32_t t : c.allowed_token_ids)
      if (valid(t)) allowed[static_cast<size_t>(t)] = true;
    for (int32_t t = 0; t < n_vocab; ++t)
      if (!allowed[static_cast<size_t>(t)]) logits[t] = kBanned;
  }
  for (const std::vector<int32_t>& word : c.bad_words) {
    if (word.empty() || !valid(word.back())) continue;
    const size_t prefix = word.size() - 1;
    if (prefix > generated.size()) continue;
    if (std::equal(word.begin(), word.end() - 1, generated.end() - static_cast<std::ptrdiff_t>(prefix)))
      logits[word.back()] = kBanned;
  }
  if (static_cast<int64_t>(generated.size()) < c.min_tokens)
    for (int32_t t : c.min_tokens_banned)
      if (valid(t)) logits[t] = kBanned;
  for (const auto& [t, bias] : c.logit_bias)
    if (valid(t)) logits[t] += bias;
}

}  // namespace ferry
