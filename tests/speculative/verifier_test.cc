// Speculative sampling keeps the target's distribution: chi-square tests of the first tokens
// of continuations sampled with speculation against the target's exact probabilities, over
// stub "models" (fixed history-dependent distributions) so thousands of samples take
// milliseconds. Significance 0.001 (critical value from chi_square.h); seeds are fixed, so
// each test is deterministic, and a deliberately wrong rule shows the test can fail.
#include "speculative/verifier.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "chi_square.h"
#include "speculative/ngram_proposer.h"

namespace ferry::spec {
namespace {

constexpr int32_t kVocab = 6;

// A "model": logits as a fixed pseudo-random function of (salt, history).
struct StubModel {
  uint64_t salt;
  float scale;
  std::vector<float> Logits(const std::vector<int32_t>& history) const {
    uint64_t h = salt;
    for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001b3ull;
    std::mt19937_64 rng(h);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> l(kVocab);  // [kVocab]
    for (float& x : l) x = d(rng);
    return l;
  }
};

const StubModel kTarget{0x1234, 1.5f};
const StubModel kDraft{0x9876, 1.5f};  // a different model: many rejections

std::vector<float> Probs(const StubModel& m, const SamplingParams& sp, const std::vector<int32_t>& history) {
  Sampler s(sp, kVocab);
  std::vector<float> l = m.Logits(history), p(kVocab);
  s.ProcessedProbs(l.data(), history, p);
  return p;
}

enum class Rule { kCorrect, kWrongResampleFromP };
enum class Draft { kModel, kDeterministic };

// Generates `n` tokens after `prompt` by repeated speculative steps of k drafts.
std::vector<int32_t> Speculate(const std::vector<int32_t>& prompt, int n, int k, SamplingParams sp,
                               uint64_t seed, Draft draft_kind, Rule rule) {
  sp.seed = seed;
  Sampler s(sp, kVocab);
  std::vector<int32_t> seq = prompt;
  std::vector<float> scratch(kVocab);
  while (static_cast<int>(seq.size() - prompt.size()) < n) {
    std::vector<int32_t> draft, hist = seq;
    std::vector<float> q, p;
    for (int j = 0; j < k; ++j) {
      std::vector<float> l = kDraft.Logits(hist);
      if (draft_kind == Draft::kDeterministic) {
        draft.push_back(ArgMax(l.data(), kVocab));  // like an n-gram lookup: no q
      } else {
        s.ProcessedProbs(l.data(), hist, scratch);
        q.insert(q.end(), scratch.begin(), scratch.end());
        draft.push_back(s.SampleFromProbs(scratch));
      }
      hist.push_back(draft.back());
    }
    hist = seq;
    for (int j = 0; j <= k; ++j) {
      std::vector<float> row = Probs(kTarget, sp, hist);
      p.insert(p.end(), row.begin(), row.end());
      if (j < k) hist.push_back(draft[static_cast<size_t>(j)]);
    }
    Verification v;
    if (rule == Rule::kCorrect) {
      v = VerifySampled(p, q, draft, kVocab, s);
    } else {
      // Wrong on purpose: on rejection draw from p instead of the residual max(0, p - q).
      v = VerifySampled(p, q, draft, kVocab, s);
      if (v.num_accepted < k)
        v.tokens.back() = s.SampleFromProbs(
            std::span<const float>(p).subspan(static_cast<size_t>(v.num_accepted) * kVocab, kVocab));
    }
    seq.insert(seq.end(), v.tokens.begin(), v.tokens.end());
  }
  return std::vector<int32_t>(seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                              seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()) + n);
}

// Exact target probabilities of every continuation of length n.
void Exact(const std::vector<int32_t>& hist, int n, double prob, const SamplingParams& sp,
           std::vector<int32_t>& path, std::map<std::vector<int32_t>, double>& out) {
  if (n == 0) {
    if (prob > 0) out[path] = prob;
    return;
  }
  std::vector<float> p = Probs(kTarget, sp, hist);
  for (int32_t t = 0; t < kVocab; ++t) {
    if (p[static_cast<size_t>(t)] <= 0) continue;
    std::vector<int32_t> h = hist;
    h.push_back(t);
    path.push_back(t);
    Exact(h, n - 1, prob * p[static_cast<size_t>(t)], sp, path, out);
    path.pop_back();
  }
}

testing::ChiSquare RunChiSquare(const SamplingParams& sp, Draft draft, Rule rule, int n_tokens = 2,
                                int k = 3) {
  const std::vector<int32_t> prompt = {1, 4, 2};
  const int64_t samples = 20000;
  std::map<std::vector<int32_t>, int64_t> observed;
  for (int64_t i = 0; i < samples; ++i)
    ++observed[Speculate(prompt, n_tokens, k, sp, 1000 + static_cast<uint64_t>(i), draft, rule)];
  std::map<std::vector<int32_t>, double> expected;
  std::vector<int32_t> path;
  Exact(prompt, n_tokens, 1.0, sp, path, expected);
  testing::ChiSquare c = testing::ChiSquareTest(observed, expected, samples);
  std::printf("chi-square %.1f, dof %d, critical(0.001) %.1f\n", c.statistic, c.dof, c.Critical001());
  return c;
}

SamplingParams Params(float temp, int32_t top_k, float top_p, float min_p) {
  SamplingParams sp;
  sp.temperature = temp;
  sp.top_k = top_k;
  sp.top_p = top_p;
  sp.min_p = min_p;
  return sp;
}

TEST(VerifySampled, TemperatureOneMatchesTargetExactly) {
  auto c = RunChiSquare(Params(1.0f, 0, 1.0f, 0.0f), Draft::kModel, Rule::kCorrect);
  EXPECT_GE(c.dof, 20);
  EXPECT_LT(c.statistic, c.Critical001()) << "dof " << c.dof;
}

TEST(VerifySampled, TopPAndTemperatureMatchTargetExactly) {
  auto c = RunChiSquare(Params(0.7f, 0, 0.8f, 0.0f), Draft::kModel, Rule::kCorrect);
  EXPECT_LT(c.statistic, c.Critical001()) << "dof " << c.dof;
}

TEST(VerifySampled, TopKMinPAndPenaltiesMatchTargetExactly) {
  SamplingParams sp = Params(1.2f, 4, 1.0f, 0.05f);
  sp.repeat_penalty = 1.5f;  // history-dependent: p and q must see the same drafted history
  sp.presence_penalty = 0.5f;
  auto c = RunChiSquare(sp, Draft::kModel, Rule::kCorrect, /*n_tokens=*/3);
  EXPECT_GE(c.dof, 20);
  EXPECT_LT(c.statistic, c.Critical001()) << "dof " << c.dof;
}

TEST(VerifySampled, DeterministicDraftsMatchTargetExactly) {
  auto c = RunChiSquare(Params(1.0f, 0, 1.0f, 0.0f), Draft::kDeterministic, Rule::kCorrect);
  EXPECT_LT(c.statistic, c.Critical001()) << "dof " << c.dof;
  auto t = RunChiSquare(Params(0.8f, 0, 0.9f, 0.0f), Draft::kDeterministic, Rule::kCorrect);
  EXPECT_LT(t.statistic, t.Critical001()) << "dof " << t.dof;
}

TEST(VerifySampled, TheTestDetectsAWrongRejectionRule) {
  // Power check: resampling from p (not the residual) after a rejection over-weights the
  // tokens the draft proposes too often; the same test must reject it clearly.
  auto c = RunChiSquare(Params(1.0f, 0, 1.0f, 0.0f), Draft::kModel, Rule::kWrongResampleFromP);
  EXPECT_GT(c.statistic, 3 * c.Critical001()) << "dof " << c.dof;
}

TEST(VerifySampled, AcceptsIdenticalDistributionsAlways) {
  // p == q: every draft is accepted (u * q < p for u < 1) and a bonus token follows.
  SamplingParams sp = Params(1.0f, 0, 1.0f, 0.0f);
  sp.seed = 3;
  Sampler s(sp, kVocab);
  std::vector<float> row = {0.1f, 0.2f, 0.3f, 0.1f, 0.2f, 0.1f};
  std::vector<float> p, q;
  for (int j = 0; j < 4; ++j) p.insert(p.end(), row.begin(), row.end());
  for (int j = 0; j < 3; ++j) q.insert(q.end(), row.begin(), row.end());
  for (int rep = 0; rep < 100; ++rep) {
    Verification v = VerifySampled(p, q, std::vector<int32_t>{2, 0, 5}, kVocab, s);
    ASSERT_EQ(v.num_accepted, 3);
    ASSERT_EQ(v.tokens.size(), 4u);
  }
}

TEST(VerifySampled, NeverEmitsATokenTheTargetExcludes) {
  SamplingParams sp = Params(1.0f, 0, 1.0f, 0.0f);
  sp.seed = 5;
  Sampler s(sp, kVocab);
  std::vector<float> p = {0, 0.5f, 0.5f, 0, 0, 0, /*row 1*/ 0, 0, 0, 1, 0, 0};
  std::vector<float> q = {0.9f, 0.1f, 0, 0, 0, 0};
  for (int rep = 0; rep < 200; ++rep) {
    Verification v = VerifySampled(p, q, std::vector<int32_t>{0}, kVocab, s);  // p(0) = 0: always rejected
    ASSERT_EQ(v.num_accepted, 0);
    ASSERT_TRUE(v.tokens[0] == 1 || v.tokens[0] == 2);  // residual max(0, p - q) = {0, .4, .5, ...}
  }
}

TEST(VerifyGreedy, AcceptsExactlyTheTargetsChoices) {
  EXPECT_EQ(VerifyGreedy(std::vector<int32_t>{5, 7, 9, 11}, std::vector<int32_t>{5, 7, 9}).tokens,
            (std::vector<int32_t>{5, 7, 9, 11}));
  Verification v = VerifyGreedy(std::vector<int32_t>{5, 8, 9, 11}, std::vector<int32_t>{5, 7, 9});
  EXPECT_EQ(v.num_accepted, 1);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{5, 8}));
  v = VerifyGreedy(std::vector<int32_t>{4}, std::vector<int32_t>{});
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{4}));
}

TEST(NgramLookup, DraftsWhatFollowedTheMostRecentMatch) {
  std::vector<int32_t> t = {1, 2, 3, 4, 5, 9, 2, 3, 6, 7, 1, 2, 3};
  // Last 3 tokens {1,2,3} first occur at 0 -> {4, 5}; the most recent {2,3} is at 6 -> {6, 7}.
  EXPECT_EQ(NgramLookup(t, 3, 2), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(NgramLookup(t, 2, 2), (std::vector<int32_t>{6, 7}));
  // Past the end the copy continues from itself: the sequence's period repeats.
  EXPECT_EQ(NgramLookup(t, 3, 12), (std::vector<int32_t>{4, 5, 9, 2, 3, 6, 7, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(NgramLookup(std::vector<int32_t>{1, 2, 3}, 2, 4).empty());
  EXPECT_TRUE(NgramLookup(std::vector<int32_t>{}, 2, 4).empty());
  EXPECT_EQ(NgramLookup(std::vector<int32_t>{8, 8}, 2, 4), (std::vector<int32_t>{8, 8, 8, 8}));
  EXPECT_EQ(NgramLookup(std::vector<int32_t>{1, 5, 6, 5, 6}, 2, 5), (std::vector<int32_t>{5, 6, 5, 6, 5}));
}

TEST(SpecState, AdaptsKAndPausesWhileNothingIsAccepted) {
  SpecState s;
  s.Enable(4, /*adapt=*/true);
  s.OnVerified(4, 4);
  EXPECT_EQ(s.k, 4);  // capped at max_k
  s.OnVerified(4, 0);
  EXPECT_EQ(s.k, 2);
  s.OnVerified(2, 0);
  EXPECT_EQ(s.k, 1);
  EXPECT_TRUE(s.ShouldDraft());
  s.OnVerified(1, 0);  // nothing even at k = 1: pause 2 steps
  EXPECT_FALSE(s.ShouldDraft());
  EXPECT_FALSE(s.ShouldDraft());
  EXPECT_TRUE(s.ShouldDraft());
  s.OnVerified(1, 0);  // again: pause 4 steps
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(s.ShouldDraft());
  EXPECT_TRUE(s.ShouldDraft());
  s.OnVerified(1, 1);  // accepted: grows again, misses reset
  EXPECT_EQ(s.k, 2);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.num_drafted, 13);
  EXPECT_EQ(s.num_accepted, 5);
  SpecState fixed;
  fixed.Enable(3, /*adapt=*/false);
  fixed.OnVerified(3, 0);
  EXPECT_EQ(fixed.k, 3);
  EXPECT_TRUE(fixed.ShouldDraft());
  SpecState off;
  off.Enable(0, true);
  EXPECT_FALSE(off.ShouldDraft());
}

}  // namespace
}  // namespace ferry::spec
