// The mean of n values and its standard error, from their sum and sum of squares: how
// `ferry ppl` (and llama-perplexity) report a per-position quantity over a text.
#pragma once

#include <cmath>
#include <cstdint>

namespace ferry {

struct MeanAndError {
  double mean = 0, error = 0;
};

inline MeanAndError MeanOf(double sum, double sum2, int64_t n) {
  const double mean = sum / static_cast<double>(n);
  const double var = sum2 / static_cast<double>(n) - mean * mean;
  return {mean, n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0};
}

}  // namespace ferry
