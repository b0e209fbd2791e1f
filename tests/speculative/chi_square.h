// Pearson's chi-square goodness-of-fit for the speculative-decoding distribution tests:
// observed counts against exact probabilities, cells with expected count < 5 pooled.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace ferry::testing {

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  // Upper critical value at significance alpha = 0.001 (z = 3.0902), by the Wilson-Hilferty
  // approximation (within 1% of the exact quantile for dof >= 3).
  double Critical001() const {
    const double d = dof, z = 3.0902;
    const double t = 1.0 - 2.0 / (9.0 * d) + z * std::sqrt(2.0 / (9.0 * d));
    return d * t * t * t;
  }
};

// observed[key] counts, expected_prob[key] exact probabilities (summing to 1), n samples.
template <typename Key>
ChiSquare ChiSquareTest(const std::map<Key, int64_t>& observed, const std::map<Key, double>& expected_prob,
                        int64_t n) {
  ChiSquare r;
  double pooled_obs = 0, pooled_exp = 0;
  int cells = 0;
  for (const auto& [key, p] : expected_prob) {
    const double e = p * static_cast<double>(n);
    auto it = observed.find(key);
    const double o = it == observed.end() ? 0.0 : static_cast<double>(it->second);
    if (e < 5) {
      pooled_obs += o;
      pooled_exp += e;
      continue;
    }
    r.statistic += (o - e) * (o - e) / e;
    ++cells;
  }
  // Outcomes the exact distribution gives probability 0 must never occur: they count fully.
  for (const auto& [key, count] : observed)
    if (!expected_prob.count(key)) pooled_obs += static_cast<double>(count);
  if (pooled_exp > 0) {
    r.statistic += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++cells;
  } else if (pooled_obs > 0) {
    r.statistic = INFINITY;
  }
  r.dof = cells - 1;
  return r;
}

}  // namespace ferry::testing
