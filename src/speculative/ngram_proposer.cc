#include "speculative/ngram_proposer.h"

#include <algorithm>

namespace ferry::spec {

std::vector<int32_t> NgramLookup(std::span<const int32_t> tokens, int32_t max_n, int32_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= 1 && k > 0; --n) {
    std::span<const int32_t> tail = tokens.subspan(static_cast<size_t>(len - n));
    // Most recent match first: start positions s < len - n, scanning backwards.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + s)) continue;
      // Copy what followed; past the end, keep copying from the draft itself (a match just
      // before the end of a repeating sequence continues the repetition, as LZ77 copies do).
      std::vector<int32_t> draft;
      for (int64_t i = s + n; static_cast<int32_t>(draft.size()) < k; ++i)
        draft.push_back(i < len ? tokens[static_cast<size_t>(i)] : draft[static_cast<size_t>(i - len)]);
      return draft;
    }
  }
  return {};
}

Status NgramProposer::Propose(std::span<const ProposeRequest> requests) {
  for (const ProposeRequest& r : requests) {
    r.state->ClearDraft();
    const int32_t k = std::min(r.state->k, r.max_draft);
    if (k > 0) r.state->draft = NgramLookup(r.tokens, max_n_, k);
  }
  return Status::Ok();
}

}  // namespace ferry::spec
