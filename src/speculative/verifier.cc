#include "speculative/verifier.h"

#include <algorithm>

#include "base/check.h"

namespace ferry::spec {

Verification VerifySampled(std::span<const float> p, std::span<const float> q, std::span<const int32_t> draft,
                           int32_t n_vocab, Sampler& rng) {
  const size_t k = draft.size(), nv = static_cast<size_t>(n_vocab);
  FERRY_CHECK(p.size() == (k + 1) * nv);
  FERRY_CHECK(q.empty() || q.size() == k * nv);
  Verification v;
  std::vector<float> residual;  // [n_vocab]
  for (size_t j = 0; j < k; ++j) {
    std::span<const float> pj = p.subspan(j * nv, nv);
    const int32_t x = draft[j];
    FERRY_CHECK(x >= 0 && x < n_vocab);
    const double px = pj[static_cast<size_t>(x)];
    const double qx = q.empty() ? 1.0 : q[j * nv + static_cast<size_t>(x)];
    // Accept when u < p/q, i.e. u * q < p (no division; q(x) > 0 since x was drawn from q).
    if (rng.Uniform() * qx < px) {
      v.tokens.push_back(x);
      ++v.num_accepted;
      continue;
    }
    // Rejected: draw from the residual max(0, p - q), renormalized by SampleFromProbs.
    residual.assign(pj.begin(), pj.end());
    double mass = 0;
    if (q.empty()) {
      residual[static_cast<size_t>(x)] = 0.0f;
    } else {
      std::span<const float> qj = q.subspan(j * nv, nv);
      for (size_t i = 0; i < nv; ++i) residual[i] = std::max(0.0f, residual[i] - qj[i]);
    }
    for (float r : residual) mass += r;
    // A rejection implies p(x) < q(x), so p has mass where q has less; only rounding can leave
    // none, and then p itself is the right fallback.
    v.tokens.push_back(mass > 0 ? rng.SampleFromProbs(residual) : rng.SampleFromProbs(pj));
    return v;
  }
  v.tokens.push_back(rng.SampleFromProbs(p.subspan(k * nv, nv)));  // bonus token
  return v;
}

Verification VerifyGreedy(std::span<const int32_t> target_choice, std::span<const int32_t> draft) {
  FERRY_CHECK(target_choice.size() == draft.size() + 1);
  Verification v;
  for (size_t j = 0; j < draft.size(); ++j) {
    if (draft[j] != target_choice[j]) break;
    v.tokens.push_back(draft[j]);
    ++v.num_accepted;
  }
  v.tokens.push_back(target_choice[static_cast<size_t>(v.num_accepted)]);
  return v;
}

}  // namespace ferry::spec
