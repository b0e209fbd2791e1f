// The median of timing samples (the mean of the middle two for an even count): the bench
// commands' per-repetition figures and the prefix tiers' start-up cost probes.
#pragma once

#include <algorithm>
#include <vector>

namespace ferry {

// v must not be empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace ferry
