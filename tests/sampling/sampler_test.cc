#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace ferry {
namespace {

std::vector<float> RandomLogits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

SamplingParams Plain(float temp) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  return p;
}

TEST(Sampler, GreedyPicksArgMaxFirstOnTies) {
  std::vector<float> l = {0.f, 3.f, 1.f, 3.f};
  Sampler s(Plain(0.f), 4);
  EXPECT_EQ(s.Sample(l.data(), {}), 1);
  EXPECT_EQ(ArgMax(l.data(), 4), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  auto run = [](uint64_t seed) {
    SamplingParams p = Plain(1.0f);
    p.seed = seed;
    Sampler s(p, 100);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) {
      auto l = RandomLogits(100, static_cast<uint32_t>(i));
      out.push_back(s.Sample(l.data(), {}));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, TopKRestrictsToKBest) {
  auto l0 = RandomLogits(50, 1);
  std::vector<std::pair<float, int>> sorted;
  for (int i = 0; i < 50; ++i) sorted.emplace_back(l0[static_cast<size_t>(i)], i);
  std::sort(sorted.rbegin(), sorted.rend());
  std::set<int> top3 = {sorted[0].second, sorted[1].second, sorted[2].second};
  SamplingParams p = Plain(5.0f);  // hot: would otherwise pick widely
  p.top_k = 3;
  Sampler s(p, 50);
  std::set<int> seen;
  for (int i = 0; i < 500; ++i) {
    auto l = l0;
    seen.insert(s.Sample(l.data(), {}));
  }
  EXPECT_EQ(seen, top3);
}

TEST(Sampler, TopPKeepsSmallestNucleus) {
  // probs ~ 0.7, 0.2, 0.1 (softmax of logs): top_p 0.8 keeps the first two.
  std::vector<float> base = {std::log(0.7f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p = Plain(1.0f);
  p.top_p = 0.8f;
  Sampler s(p, 3);
  std::map<int, int> hist;
  for (int i = 0; i < 2000; ++i) {
    auto l = base;
    hist[s.Sample(l.data(), {})]++;
  }
  EXPECT_EQ(hist.count(2), 0u);
  EXPECT_NEAR(hist[0] / 2000.0, 0.7 / 0.9, 0.05);
}

TEST(Sampler, MinPDropsUnlikely) {
  std::vector<float> base = {std::log(0.6f), std::log(0.35f), std::log(0.05f)};
  SamplingParams p = Plain(1.0f);
  p.min_p = 0.1f;  // 0.05 < 0.1 * 0.6
  Sampler s(p, 3);
  for (int i = 0; i < 1000; ++i) {
    auto l = base;
    EXPECT_NE(s.Sample(l.data(), {}), 2);
  }
}

TEST(Sampler, TemperatureMatchesDistribution) {
  std::vector<float> base = {0.f, 1.f};
  SamplingParams p = Plain(2.0f);
  Sampler s(p, 2);
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    ones += s.Sample(l.data(), {}) == 1;
  }
  double expect = 1.0 / (1.0 + std::exp(-0.5));
  EXPECT_NEAR(ones / static_cast<double>(n), expect, 0.015);
}

TEST(Sampler, PenaltiesChangeGreedyChoice) {
  std::vector<float> l = {2.0f, 1.9f, 0.f};
  std::vector<int32_t> hist = {0, 0};
  SamplingParams rep = Plain(0.f);
  rep.repeat_penalty = 1.1f;  // 2.0/1.1 = 1.82 < 1.9
  EXPECT_EQ(Sampler(rep, 3).Sample(std::vector<float>(l).data(), hist), 1);
  SamplingParams freq = Plain(0.f);
  freq.frequency_penalty = 0.06f;  // 2.0 - 2*0.06 = 1.88 < 1.9
  EXPECT_EQ(Sampler(freq, 3).Sample(std::vector<float>(l).data(), hist), 1);
  SamplingParams pres = Plain(0.f);
  pres.presence_penalty = 0.05f;  // 2.0 - 0.05 = 1.95 > 1.9
  EXPECT_EQ(Sampler(pres, 3).Sample(std::vector<float>(l).data(), hist), 0);
  pres.presence_penalty = 0.2f;
  EXPECT_EQ(Sampler(pres, 3).Sample(std::vector<float>(l).data(), hist), 1);
}

// OpenAI's presence/frequency penalties count generated tokens only (history past
// prompt_tokens); repeat_penalty (llama.cpp's) still sees the prompt.
TEST(Sampler, OpenAiPenaltiesSkipThePrompt) {
  const std::vector<float> l = {2.0f, 1.9f, 0.f};
  const std::vector<int32_t> hist = {0, 0, 1};  // prompt {0, 0}, then 1 was generated
  SamplingParams freq = Plain(0.f);
  freq.frequency_penalty = 0.5f;
  freq.prompt_tokens = 2;  // 0 is not penalized: 2.0 > 1.9 - 0.5
  EXPECT_EQ(Sampler(freq, 3).Sample(std::vector<float>(l).data(), hist), 0);
  freq.prompt_tokens = 0;  // counted: 2.0 - 1.0 < 1.4
  EXPECT_EQ(Sampler(freq, 3).Sample(std::vector<float>(l).data(), hist), 1);
  SamplingParams pres = Plain(0.f);
  pres.presence_penalty = 0.5f;
  pres.prompt_tokens = 3;  // all prompt: nothing penalized
  std::vector<float> row = l;
  Sampler(pres, 3).Sample(row.data(), hist);
  EXPECT_EQ(row, l);
  SamplingParams rep = Plain(0.f);
  rep.repeat_penalty = 1.1f;
  rep.repeat_last_n = -1;  // the whole history
  rep.prompt_tokens = 3;
  std::vector<int32_t> long_hist(100, 2);
  long_hist[0] = 0;  // far back, in the prompt
  EXPECT_EQ(Sampler(rep, 3).Sample(std::vector<float>(l).data(), long_hist), 1);
}

// The sampling chain restated independently of sampler.cc, in double precision, from its
// specification: penalties (llama.cpp's repeat penalty once per distinct token; OpenAI's
// presence + frequency * count), then llama.cpp's default order top-k, top-p (the smallest
// prefix of the sorted softmax reaching top_p), min-p (p >= min_p * p_max), temperature.
// Valid for a history inside repeat_last_n with no prompt part, as the test below asserts.
std::vector<double> ReferenceChain(const std::vector<float>& logits, const std::vector<int32_t>& history,
                                   const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<double> l(logits.begin(), logits.end());
  std::map<int32_t, int> count;
  for (int32_t t : history) ++count[t];
  for (const auto& [t, c] : count) {
    double& x = l[static_cast<size_t>(t)];
    x = x > 0 ? x / p.repeat_penalty : x * p.repeat_penalty;
    x -= p.presence_penalty + p.frequency_penalty * c;
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  size_t keep = p.top_k > 0 ? std::min(n, static_cast<size_t>(p.top_k)) : n;
  auto softmax = [&](size_t k, double temp) {
    std::vector<double> q(k);
    double z = 0;
    for (size_t i = 0; i < k; ++i) z += (q[i] = std::exp((l[order[i]] - l[order[0]]) / temp));
    for (double& v : q) v /= z;
    return q;
  };
  std::vector<double> q = softmax(keep, 1.0);
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += q[i];
    if (cum >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  q = softmax(keep, 1.0);
  size_t min_keep = 1;
  while (min_keep < keep && q[min_keep] >= p.min_p * q[0]) ++min_keep;
  q = softmax(min_keep, p.temperature);
  std::vector<double> out(n, 0.0);
  for (size_t i = 0; i < min_keep; ++i) out[order[i]] = q[i];
  return out;
}

// ProcessedProbs and 20000 draws of Sample both match the independent chain above, for a
// chain with every filter and penalty on: probabilities within 1e-5, and the draws within
// chi-square (alpha = 0.001, Wilson-Hilferty critical value) of it.
TEST(Sampler, SampleDrawsFromTheSpecifiedChain) {
  SamplingParams p = Plain(0.9f);
  p.top_k = 12;
  p.top_p = 0.9f;
  p.min_p = 0.1f;
  p.repeat_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.25f;
  const int n = 40;
  for (uint32_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE("logits seed " + std::to_string(seed));
    const auto logits = RandomLogits(n, seed);
    // The history repeats likely tokens (ranks 0, 1 twice, 2, 5, 9 of the raw logits), so the
    // penalties move tokens inside the support, where they change the distribution.
    std::vector<int32_t> rank(n);
    for (int i = 0; i < n; ++i) rank[static_cast<size_t>(i)] = i;
    std::sort(rank.begin(), rank.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    const std::vector<int32_t> history = {rank[0], rank[1], rank[1], rank[2], rank[5], rank[9], 39};
    ASSERT_EQ(p.prompt_tokens, 0);
    ASSERT_GE(p.repeat_last_n, static_cast<int32_t>(history.size()));
    const std::vector<double> ref = ReferenceChain(logits, history, p);
    std::vector<float> probs(n), l = logits;
    Sampler(p, n).ProcessedProbs(l.data(), history, probs);
    int support = 0;
    for (int t = 0; t < n; ++t) {
      EXPECT_NEAR(probs[static_cast<size_t>(t)], ref[static_cast<size_t>(t)], 1e-5) << "token " << t;
      support += ref[static_cast<size_t>(t)] > 0;
    }
    ASSERT_GE(support, 2);
    Sampler s(p, n);
    std::vector<int64_t> counts(n, 0);
    const int draws = 20000;
    for (int i = 0; i < draws; ++i) {
      std::vector<float> c = logits;
      ++counts[static_cast<size_t>(s.Sample(c.data(), history))];
    }
    double chi = 0;
    for (int t = 0; t < n; ++t) {
      const double e = ref[static_cast<size_t>(t)] * draws;
      if (e == 0) {
        EXPECT_EQ(counts[static_cast<size_t>(t)], 0) << "token " << t << " is outside the specified support";
        continue;
      }
      chi += (counts[static_cast<size_t>(t)] - e) * (counts[static_cast<size_t>(t)] - e) / e;
    }
    const double dof = support - 1, z = 3.0902, wh = 1 - 2 / (9 * dof) + z * std::sqrt(2 / (9 * dof));
    EXPECT_LT(chi, dof * wh * wh * wh);
  }
}

TEST(Sampler, ProcessedProbsIsOneHotOnThePenalizedArgMaxWhenGreedy) {
  SamplingParams p = Plain(0.0f);
  p.repeat_penalty = 10.0f;
  std::vector<float> l = {1.0f, 5.0f, 4.0f, -1.0f}, probs(4);
  const std::vector<int32_t> history = {1};  // penalizes token 1: 5 / 10 < 4
  Sampler s(p, 4);
  s.ProcessedProbs(l.data(), history, probs);
  EXPECT_EQ(probs, (std::vector<float>{0, 0, 1, 0}));
  std::vector<float> l2 = {1.0f, 5.0f, 4.0f, -1.0f};
  EXPECT_EQ(Sampler(p, 4).Sample(l2.data(), history), 2);
}

TEST(Sampler, SampleFromProbsFollowsTheWeights) {
  Sampler s(Plain(1.0f), 4);
  std::vector<float> w = {0.0f, 3.0f, 0.0f, 1.0f};  // unnormalized
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    int32_t t = s.SampleFromProbs(w);
    ASSERT_TRUE(t == 1 || t == 3);
    ones += t == 1;
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);  // 4.4 standard deviations
}

}  // namespace
}  // namespace ferry
