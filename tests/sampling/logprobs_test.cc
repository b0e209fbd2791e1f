// ComputeLogprobs against a direct double-precision log-softmax and a full sort.
#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ferry {
namespace {

TEST(LogprobsTest, MatchesReferenceLogSoftmaxAndTopN) {
  std::mt19937 rng(7);
  for (int32_t n_vocab : {1, 2, 5, 33, 257}) {
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    std::normal_distribution<float> dist(0.0f, 4.0f);
    for (float& l : logits) l = dist(rng) + 50.0f;  // large offsets must not overflow
    if (n_vocab > 3) logits[2] = logits[1];         // a tie: the lower id comes first
    double z = 0;
    for (float l : logits) z += std::exp(static_cast<double>(l));
    for (int32_t top_n : {0, 1, 3, n_vocab, n_vocab + 4}) {
      const int32_t token = n_vocab / 2;
      TokenLogprobs lp = ComputeLogprobs(logits.data(), n_vocab, token, top_n);
      EXPECT_NEAR(lp.logprob, std::log(std::exp(static_cast<double>(logits[token])) / z), 1e-4);
      std::vector<int32_t> order(static_cast<size_t>(n_vocab));
      for (int32_t i = 0; i < n_vocab; ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      // The rank is the token's 1-based place in the full stable order.
      EXPECT_EQ(lp.rank, 1 + std::find(order.begin(), order.end(), token) - order.begin());
      ASSERT_EQ(lp.top.size(), static_cast<size_t>(std::min(top_n, n_vocab)));
      for (size_t i = 0; i < lp.top.size(); ++i) {
        EXPECT_EQ(lp.top[i].token, order[i]) << "n_vocab " << n_vocab << " rank " << i;
        EXPECT_NEAR(lp.top[i].logprob, static_cast<double>(logits[order[i]]) - std::log(z), 1e-4);
      }
    }
  }
}

TEST(LogprobsTest, ProbabilitiesSumToOne) {
  std::vector<float> logits = {1.0f, -2.0f, 0.5f, 3.0f};
  TokenLogprobs lp = ComputeLogprobs(logits.data(), 4, 3, 4);
  double sum = 0;
  for (const TokenLogprob& t : lp.top) sum += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(lp.top[0].token, 3);
  EXPECT_FLOAT_EQ(lp.logprob, lp.top[0].logprob);
}

}  // namespace
}  // namespace ferry
