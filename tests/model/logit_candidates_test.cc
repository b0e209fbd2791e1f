// The reduced gather of a vocabulary-split head (model/logit_candidates.h): each shard's top K,
// merged in rank order, is the whole row's top K in the sampler's order (larger logit, then
// lower token), and sampling from the scattered candidates picks, draw for draw, what sampling
// from the whole row picks. Rows are drawn from a few values so that ties are everywhere.
#include "model/logit_candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace ferry {
namespace {

using Candidates = std::vector<LogitCandidate>;

std::vector<std::pair<float, int32_t>> Pairs(const Candidates& c) {
  std::vector<std::pair<float, int32_t>> p;
  for (const LogitCandidate& x : c) p.emplace_back(x.logit, x.token);
  return p;
}

// The whole row's k largest, as Sampler::Filter orders them.
Candidates ReferenceTopK(const std::vector<float>& row, int32_t k) {
  Candidates all;
  for (size_t i = 0; i < row.size(); ++i) all.push_back({row[i], static_cast<int32_t>(i)});
  std::sort(all.begin(), all.end(), [](const LogitCandidate& a, const LogitCandidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
  });
  all.resize(std::min(all.size(), static_cast<size_t>(k)));
  return all;
}

// Shards [split[r], split[r + 1]) of row, each reduced to its top k, merged in rank order.
Candidates SplitTopK(const std::vector<float>& row, const std::vector<int64_t>& split, int32_t k) {
  std::vector<Candidates> per_rank;
  for (size_t r = 0; r + 1 < split.size(); ++r) {
    const int64_t v0 = split[r], n = split[r + 1] - v0;
    Candidates c(static_cast<size_t>(ShardCandidateCount(k, n)));
    ShardTopK(row.data() + v0, n, v0, k, c.data());
    per_rank.push_back(std::move(c));
  }
  std::vector<std::span<const LogitCandidate>> shards(per_rank.begin(), per_rank.end());
  Candidates merged;
  MergeShardCandidates(shards, k, &merged);
  return merged;
}

TEST(LogitCandidates, ShardTopKOrdersByLogitThenTheLowerToken) {
  const std::vector<float> row = {1, 3, 3, 2, 3};
  Candidates c(3);
  ShardTopK(row.data(), 5, 10, 3, c.data());
  EXPECT_EQ(Pairs(c), (std::vector<std::pair<float, int32_t>>{{3, 11}, {3, 12}, {3, 14}}));
  ShardTopK(row.data(), 5, 10, 1, c.data());  // greedy: the first of the maxima
  EXPECT_EQ(c[0].token, 11);
  // K larger than the shard: every token, in order.
  ASSERT_EQ(ShardCandidateCount(40, 5), 5);
  Candidates all(5);
  ShardTopK(row.data(), 5, 0, 40, all.data());
  EXPECT_EQ(Pairs(all), (std::vector<std::pair<float, int32_t>>{{3, 1}, {3, 2}, {3, 4}, {2, 3}, {1, 0}}));
}

TEST(LogitCandidates, MergeBreaksTiesAcrossRanksToTheLowestToken) {
  // Unequal shards: tokens [0, 3) and [3, 8); the maximum 5 on both.
  const std::vector<float> row = {0, 5, 1, 5, 5, 0, 1, 2};
  const std::vector<int64_t> split = {0, 3, 8};
  EXPECT_EQ(Pairs(SplitTopK(row, split, 1)), (std::vector<std::pair<float, int32_t>>{{5, 1}}));
  EXPECT_EQ(Pairs(SplitTopK(row, split, 4)),
            (std::vector<std::pair<float, int32_t>>{{5, 1}, {5, 3}, {5, 4}, {2, 7}}));
  // K larger than either shard (and than the row): the whole row, in order.
  EXPECT_EQ(Pairs(SplitTopK(row, split, 20)), Pairs(ReferenceTopK(row, 20)));
}

TEST(LogitCandidates, SplitTopKIsTheWholeRowsTopKForAnySplit) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    std::vector<float> row(static_cast<size_t>(n));
    for (float& v : row) v = static_cast<float>(static_cast<int>(rng() % 7)) - 3.0f;  // many ties
    const int ranks = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> split = {0};
    for (int r = 1; r < ranks; ++r)
      split.push_back(static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 1)));
    split.push_back(n);
    std::sort(split.begin(), split.end());  // unequal, possibly empty shards
    for (int32_t k : {1, 2, 5, 40, 128})
      ASSERT_EQ(Pairs(SplitTopK(row, split, k)), Pairs(ReferenceTopK(row, k)))
          << "trial " << trial << " n " << n << " ranks " << ranks << " k " << k;
  }
}

// Draws from a sampler over the whole row and from one over the split top-k scattered back
// into a -inf row: the same tokens, draw for draw.
void ExpectSameDraws(const SamplingParams& params, int32_t n_vocab, int draws) {
  std::mt19937 rng(11);
  Sampler whole(params, n_vocab), reduced(params, n_vocab);
  const int32_t k = LogitsTopKNeeded(params);
  ASSERT_GT(k, 0);
  const std::vector<int64_t> split = {0, n_vocab / 3, n_vocab};  // unequal shards
  std::vector<float> row(static_cast<size_t>(n_vocab)), sparse(row.size());
  std::uniform_int_distribution<int> level(0, 40);
  for (int d = 0; d < draws; ++d) {
    for (float& v : row) v = static_cast<float>(level(rng)) * 0.25f;  // ties, close logits
    ScatterCandidates(SplitTopK(row, split, k), sparse.data(), n_vocab);
    std::vector<float> copy = row;
    const int32_t want = whole.Sample(copy.data(), {});
    ASSERT_EQ(reduced.Sample(sparse.data(), {}), want) << "draw " << d;
  }
}

TEST(LogitCandidates, SamplingFromTheCandidatesEqualsSamplingFromTheRow) {
  SamplingParams greedy;
  greedy.temperature = 0;
  ExpectSameDraws(greedy, 1000, 200);
  SamplingParams sampled;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
  sampled.seed = 5;
  ExpectSameDraws(sampled, 1000, 300);
  SamplingParams wide;
  wide.seed = 9;
  wide.top_k = 128;
  wide.top_p = 1.0f;
  wide.min_p = 0.0f;
  wide.temperature = 1.5f;
  ExpectSameDraws(wide, 700, 300);
}

TEST(LogitCandidates, WhatTheSamplerNeedsOfTheRow) {
  SamplingParams p;
  EXPECT_EQ(LogitsTopKNeeded(p), 40);  // the default top-k sampling
  p.temperature = 0;
  EXPECT_EQ(LogitsTopKNeeded(p), 1);
  p.repeat_penalty = 1.1f;  // can lift a token from outside the top K
  EXPECT_EQ(LogitsTopKNeeded(p), 0);
  p = SamplingParams{};
  p.presence_penalty = 0.5f;
  EXPECT_EQ(LogitsTopKNeeded(p), 0);
  p = SamplingParams{};
  p.constraints.logit_bias.push_back({7, 3.0f});
  EXPECT_EQ(LogitsTopKNeeded(p), 0);
  p = SamplingParams{};
  p.top_k = 0;  // the whole vocabulary is a candidate
  EXPECT_EQ(LogitsTopKNeeded(p), 0);
  p.top_k = kMaxGatheredTopK + 1;
  EXPECT_EQ(LogitsTopKNeeded(p), 0);
  p.top_k = kMaxGatheredTopK;
  EXPECT_EQ(LogitsTopKNeeded(p), kMaxGatheredTopK);
}

}  // namespace
}  // namespace ferry
