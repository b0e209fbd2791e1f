#include "model/logit_candidates.h"

#include <algorithm>
#include <limits>

namespace ferry {

void ShardTopK(const float* logits, int64_t n, int64_t token0, int32_t k, LogitCandidate* out) {
  const int64_t m = ShardCandidateCount(k, n);
  if (m <= 0) return;
  if (m == 1) {  // greedy: the shard's argmax, the first of equal maxima (as ArgMax)
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (logits[i] > logits[best]) best = i;
    out[0] = {logits[best], static_cast<int32_t>(token0 + best)};
    return;
  }
  // out as a heap whose top is the worst candidate kept so far; a later token replaces it only
  // when it ranks before it (a strictly larger logit: on equal ones the earlier token stays).
  auto before = [](const LogitCandidate& a, const LogitCandidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
  };
  for (int64_t i = 0; i < m; ++i) out[i] = {logits[i], static_cast<int32_t>(token0 + i)};
  std::make_heap(out, out + m, before);
  for (int64_t i = m; i < n; ++i) {
    const LogitCandidate c = {logits[i], static_cast<int32_t>(token0 + i)};
    if (!before(c, out[0])) continue;
    std::pop_heap(out, out + m, before);
    out[m - 1] = c;
    std::push_heap(out, out + m, before);
  }
  std::sort_heap(out, out + m, before);  // best first
}

void MergeShardCandidates(std::span<const std::span<const LogitCandidate>> shards, int32_t k,
                          std::vector<LogitCandidate>* merged) {
  merged->clear();
  for (std::span<const LogitCandidate> s : shards) merged->insert(merged->end(), s.begin(), s.end());
  // Stable by logit alone: equal logits keep the rank order, which is the token order.
  std::stable_sort(merged->begin(), merged->end(),
                   [](const LogitCandidate& a, const LogitCandidate& b) { return a.logit > b.logit; });
  if (merged->size() > static_cast<size_t>(k)) merged->resize(static_cast<size_t>(k));
}

void ScatterCandidates(std::span<const LogitCandidate> candidates, float* row, int64_t n_vocab) {
  std::fill_n(row, n_vocab, -std::numeric_limits<float>::infinity());
  for (const LogitCandidate& c : candidates) row[c.token] = c.logit;
}

}  // namespace ferry
