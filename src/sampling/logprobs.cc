#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>

namespace ferry {

TokenLogprobs ComputeLogprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n) {
  TokenLogprobs out;
  if (n_vocab <= 0) return out;
  // log-sum-exp in double around the max, so large logits neither overflow nor lose precision.
  float max = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(static_cast<double>(logits[id]) - lse); };
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (token >= 0 && token < n_vocab) {
    out.logprob = logprob(token);
    out.rank = 1;
    for (int32_t i = 0; i < n_vocab; ++i) out.rank += more_likely(i, token);
  }

  const int32_t k = std::clamp(top_n, 0, n_vocab);
  if (k == 0) return out;
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));  // [n_vocab] candidate ids
  for (int32_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), more_likely);
  out.top.reserve(static_cast<size_t>(k));
  for (int32_t i = 0; i < k; ++i)
    out.top.push_back({ids[static_cast<size_t>(i)], logprob(ids[static_cast<size_t>(i)])});
  return out;
}

}  // namespace ferry
