// Budgeted KV caches (StreamingLLM sinks, H2O heavy hitters): exact with a full budget, the
// kept sets each policy promises, compaction that moves the right rows, bounded memory with
// every block accounted for over a 4,096-token generation, and the attention-weight kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "isa_guard.h"
#include "kernels/kernels.h"
#include "model/kv_budget_cache.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"

namespace ferry {
namespace {

struct Fixture {
  std::unique_ptr<formats::WeightSource> src;
  std::unique_ptr<Model> model;
};

Fixture MakeTiny(DType type, const std::string& preset = "tiny") {
  const std::string path = testing::TempDir() + "/" + preset + "-" + DTypeName(type) + ".gguf";
  SyntheticModelOptions o;
  o.preset = preset;
  o.type = type;
  o.stddev = 0.08f;
  EXPECT_TRUE(WriteSyntheticModel(path, o).ok());
  Fixture f;
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok());
  f.src = std::move(*src);
  auto m = CreateModel(*f.src);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  f.model = std::move(*m);
  return f;
}

int32_t Token(int i) {
  return 3 + (i * 37 + 11) % 500;
}

// Logits of every token of `n`, fed in chunks of `chunk`.
std::vector<float> RunTokens(Model& m, KvCache& kv, int n, int chunk) {
  const int32_t nv = m.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n) * nv);
  for (int s = 0; s < n; s += chunk) {
    ForwardBatch b;
    for (int i = s; i < std::min(n, s + chunk); ++i) b.Add(Token(i), i, 0, true);
    Status st = m.Forward(b, kv, logits.data() + static_cast<size_t>(s) * nv, nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return logits;
}

std::unique_ptr<BudgetKvCache> MakeCache(const Model& m, int n_seqs, int max_seq, int max_batch,
                                         KvPolicy policy, int budget, int sinks = 4, int recent = -1,
                                         SparsityStats* stats = nullptr, const KvCacheTypes& types = {}) {
  KvBudgetConfig c;
  c.policy = policy;
  c.budget = budget;
  c.sink_tokens = sinks;
  c.recent_window = recent;
  auto cache = BudgetKvCache::Create(m.config().n_layers, n_seqs, max_seq, max_batch, m.config().n_kv_heads,
                                     m.config().head_dim, c, stats, types);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return std::move(*cache);
}

TEST(KvBudget, FullBudgetEqualsFullAttentionExactly) {
  Fixture f = MakeTiny(DType::kQ8_0);
  Model& m = *f.model;
  const int n = 150;
  auto full =
      ContiguousKvCache::Create(m.config().n_layers, 1, 256, m.config().n_kv_heads, m.config().head_dim);
  ASSERT_TRUE(full.ok());
  auto want = RunTokens(m, *full, n, 8);
  for (KvPolicy p : {KvPolicy::kSink, KvPolicy::kH2O}) {
    auto cache = MakeCache(m, 1, 256, 8, p, /*budget=*/n);
    EXPECT_EQ(RunTokens(m, *cache, n, 8), want) << KvPolicyName(p);
    EXPECT_EQ(cache->EvictedTokens(), 0);
  }
}

TEST(KvBudget, SinkKeepsFirstTokensAndRecentWindow) {
  Fixture f = MakeTiny(DType::kF16);
  Model& m = *f.model;
  auto cache = MakeCache(m, 1, 512, 4, KvPolicy::kSink, /*budget=*/40, /*sinks=*/4);
  const int32_t nv = m.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(4) * nv);
  for (int s = 0; s < 200; s += 4) {
    ForwardBatch b;
    for (int i = s; i < s + 4; ++i) b.Add(Token(i), i, 0, true);
    ASSERT_TRUE(m.Forward(b, *cache, logits.data(), nullptr).ok());
    std::vector<int32_t> kept = cache->StoredPositions(0);
    std::sort(kept.begin(), kept.end());
    std::vector<int32_t> want;
    const int next = s + 4;
    for (int p = 0; p < next; ++p)
      if (next <= 40 || p < 4 || p >= next - 36) want.push_back(p);
    ASSERT_EQ(kept, want) << "after position " << next - 1;
  }
  EXPECT_EQ(cache->EvictedTokens(), 200 - 40);
}

// Layer-0 K/V depend only on the token and its position, so after any eviction and compaction
// every kept slot must hold exactly the rows a full cache holds for that position.
// Quantized blocks (q8_0 K, q4_0 V) too: compaction moves their bytes, scales included.
TEST(KvBudget, CompactionMovesTheRightRows) {
  for (const KvCacheTypes types : {KvCacheTypes::F32(), KvCacheTypes{DType::kQ8_0, DType::kQ4_0}}) {
    SCOPED_TRACE(std::string("K ") + DTypeName(types.k) + " V " + DTypeName(types.v));
    Fixture f = MakeTiny(DType::kF32, types.k == DType::kF32 ? "tiny" : "tiny-hd64");
    Model& m = *f.model;
    auto full = ContiguousKvCache::Create(m.config().n_layers, 1, 512, m.config().n_kv_heads,
                                          m.config().head_dim, types);
    ASSERT_TRUE(full.ok());
    RunTokens(m, *full, 300, 3);
    const size_t krow = full->KeySlotBytes(), vrow = full->ValueSlotBytes();
    for (KvPolicy p : {KvPolicy::kSink, KvPolicy::kH2O}) {
      auto cache = MakeCache(m, 1, 512, 3, p, /*budget=*/64, /*sinks=*/2, -1, nullptr, types);
      RunTokens(m, *cache, 300, 3);
      ASSERT_EQ(cache->StoredTokens(0), 64) << KvPolicyName(p);
      const auto& pos = cache->StoredPositions(0);
      std::set<int32_t> unique(pos.begin(), pos.end());
      EXPECT_EQ(unique.size(), pos.size());
      for (int32_t slot = 0; slot < 64; ++slot) {
        const int32_t ps = pos[static_cast<size_t>(slot)];
        ASSERT_EQ(0, std::memcmp(cache->KeyBytes(0, 0, slot), full->KeyBytes(0, 0, ps), krow))
            << KvPolicyName(p) << " slot " << slot;
        ASSERT_EQ(0, std::memcmp(cache->ValueBytes(0, 0, slot), full->ValueBytes(0, 0, ps), vrow))
            << KvPolicyName(p) << " slot " << slot;
      }
      EXPECT_TRUE(unique.count(0) && unique.count(1));    // sinks
      const int recent = p == KvPolicy::kSink ? 62 : 31;  // budget - sinks, h2o half of it
      for (int32_t q = 300 - recent; q < 300; ++q) EXPECT_TRUE(unique.count(q)) << q;
    }
  }
}

// Two sequences decoding 4,096 tokens each in one cache: after every step each holds at most
// `budget` tokens in at most ceil(budget / block) blocks, and every block is either free or in
// exactly one table.
TEST(KvBudget, BoundedMemoryOver4096TokensAllBlocksAccounted) {
  Fixture f = MakeTiny(DType::kQ4_0);
  Model& m = *f.model;
  const int budget = 100, steps = 4096;
  for (KvPolicy p : {KvPolicy::kSink, KvPolicy::kH2O}) {
    SparsityStats stats;
    auto cache = MakeCache(m, 2, steps, 1, p, budget, 4, -1, &stats);
    const int32_t nv = m.config().n_vocab;
    std::vector<float> logits(static_cast<size_t>(2) * nv);
    const int per_seq_blocks = (budget + 63) / 64;
    for (int i = 0; i < steps; ++i) {
      ForwardBatch b;
      b.Add(Token(i), i, 0, true);
      b.Add(Token(i + 7), i, 1, true);
      ASSERT_TRUE(m.Forward(b, *cache, logits.data(), nullptr).ok()) << i;
      std::set<int32_t> seen;
      int used = 0;
      for (int s = 0; s < 2; ++s) {
        ASSERT_EQ(cache->StoredTokens(s), std::min(i + 1, budget));
        ASSERT_LE(cache->NumBlocksOf(s), per_seq_blocks);
        for (int32_t blk : cache->BlockTableOf(s))
          ASSERT_TRUE(seen.insert(blk).second) << "block in two tables";
        used += cache->NumBlocksOf(s);
      }
      ASSERT_EQ(used + cache->NumFreeBlocks(), cache->num_blocks());
      for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    }
    EXPECT_EQ(cache->EvictedTokens(), 2 * (steps - budget));
    EXPECT_EQ(stats.kv_evicted_tokens, 2 * (steps - budget));
    // Memory held is bounded by the budget (+1 token in flight), far below the full cache.
    EXPECT_LE(stats.kv_peak_bytes, static_cast<int64_t>(cache->num_blocks() * cache->BlockBytes()));
    EXPECT_LT(stats.kv_peak_bytes * 10, stats.kv_full_bytes);
  }
}

TEST(KvBudget, RewindPastEvictionIsAnErrorAndPositionZeroRestarts) {
  Fixture f = MakeTiny(DType::kF16);
  Model& m = *f.model;
  auto cache = MakeCache(m, 1, 256, 8, KvPolicy::kSink, 16);
  RunTokens(m, *cache, 64, 8);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  ForwardBatch b;
  b.Add(Token(5), 5, 0, true);
  Status st = m.Forward(b, *cache, logits.data(), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("evicted"), std::string::npos) << st.ToString();
  b.Clear();
  b.Add(Token(0), 0, 0, true);
  EXPECT_TRUE(m.Forward(b, *cache, logits.data(), nullptr).ok());
  EXPECT_EQ(cache->StoredTokens(0), 1);
  // Too many tokens in one pass for the cache's size is a clear error, not a crash.
  b.Clear();
  for (int i = 1; i < 20; ++i) b.Add(Token(i), i, 0, false);
  st = m.Forward(b, *cache, logits.data(), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("--batch"), std::string::npos) << st.ToString();
}

// H2O's choice, stated independently: after eviction the kept positions are the sinks, the
// recent window, and the Heavy() highest-scored of the others (ties: the newer position);
// replaying the returned moves on the slots gives exactly the compacted pos/score arrays.
TEST(KvBudget, H2OKeepsSinksRecentAndTheHeaviestOfTheRest) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 500; ++trial) {
    KvBudgetConfig c;
    c.policy = KvPolicy::kH2O;
    c.budget = 4 + static_cast<int32_t>(rng() % 20);
    c.sink_tokens = static_cast<int32_t>(rng() % 3);
    c.recent_window = rng() % 2 ? -1 : static_cast<int32_t>(rng() % (c.budget - c.sink_tokens + 1));
    ASSERT_TRUE(c.Validate().ok());
    KeptTokens kept;
    int32_t p = 0;
    const int32_t n = c.budget + 1 + static_cast<int32_t>(rng() % 12);
    for (int32_t i = 0; i < n; ++i) {
      p += 1 + static_cast<int32_t>(rng() % 3);  // earlier evictions leave gaps
      kept.pos.push_back(i < c.sink_tokens ? i : p);
      kept.score.push_back(static_cast<float>(rng() % 6));  // small range: many ties
    }
    const int32_t next_pos = kept.pos.back() + 1;
    const KeptTokens before = kept;
    // The expected set, from the rule alone.
    const int32_t recent_from = next_pos - c.Recent();
    std::vector<std::pair<float, int32_t>> rest;  // (score, pos)
    std::set<int32_t> want;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t q = before.pos[static_cast<size_t>(i)];
      if (q < c.sink_tokens || q >= recent_from)
        want.insert(q);
      else
        rest.push_back({before.score[static_cast<size_t>(i)], q});
    }
    std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a > b; });
    for (size_t k = 0; k < rest.size() && k < static_cast<size_t>(c.Heavy()); ++k)
      want.insert(rest[k].second);

    std::vector<SlotMove> moves = EvictOverBudget(kept, next_pos, c);
    EXPECT_EQ(std::set<int32_t>(kept.pos.begin(), kept.pos.end()), want) << "trial " << trial;
    EXPECT_LE(kept.size(), c.budget);
    // Replay the moves on a copy of the slots: slot s must then hold kept.pos[s] / score[s].
    std::vector<int32_t> slot_pos = before.pos;
    std::vector<float> slot_score = before.score;
    for (const SlotMove& m : moves) {
      slot_pos[static_cast<size_t>(m.to)] = slot_pos[static_cast<size_t>(m.from)];
      slot_score[static_cast<size_t>(m.to)] = slot_score[static_cast<size_t>(m.from)];
    }
    for (int32_t s = 0; s < kept.size(); ++s) {
      EXPECT_EQ(slot_pos[static_cast<size_t>(s)], kept.pos[static_cast<size_t>(s)]) << "trial " << trial;
      EXPECT_EQ(slot_score[static_cast<size_t>(s)], kept.score[static_cast<size_t>(s)]) << "trial " << trial;
    }
  }
}

TEST(KvBudget, BadConfigsAreClearErrors) {
  KvBudgetConfig c;
  c.policy = KvPolicy::kSink;
  c.budget = 8;
  c.sink_tokens = 4;
  c.recent_window = 6;
  auto r = BudgetKvCache::Create(1, 1, 64, 4, 1, 8, c, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("--kv-budget"), std::string::npos);
  c.recent_window = -1;
  c.budget = 0;
  EXPECT_FALSE(BudgetKvCache::Create(1, 1, 64, 4, 1, 8, c, nullptr).ok());
}

TEST(KvBudget, CacheForModelOptionsNeedsPolicyAndBudgetTogether) {
  Fixture f = MakeTiny(DType::kF16);
  const ModelConfig& mc = f.model->config();
  SparsityOptions o;
  o.kv_policy = KvPolicy::kSink;  // no budget
  auto c = CreateKvCacheFor(mc, o, 1, 128, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("--kv-budget"), std::string::npos);
  o.kv_policy = KvPolicy::kFull;
  o.kv_budget = 64;  // budget without a policy
  EXPECT_FALSE(CreateKvCacheFor(mc, o, 1, 128, 8).ok());
  o.kv_policy = KvPolicy::kH2O;
  c = CreateKvCacheFor(mc, o, 1, 128, 8);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(dynamic_cast<BudgetKvCache*>(c->get()), nullptr);
}

// The H2O score kernel against a direct double-precision softmax, over blocks with a ragged
// tail and GQA; every (query, head) row of weights sums to 1.
TEST(AttentionWeights, MatchesReferenceSoftmax) {
  ferry::testing::ScopedIsa isa_guard;
  const int n_heads = 6, n_kv = 2, hd = 16, bs = 5, n_blocks = 8, n_q = 3;
  const int64_t stride = n_kv * hd;
  std::vector<float> k(static_cast<size_t>(n_blocks * bs * stride)), v(k.size()),
      q(static_cast<size_t>(n_q * n_heads * hd));
  uint32_t s = 9;
  auto rnd = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 700.0f;
  };
  for (float& x : k) x = rnd();
  for (float& x : q) x = rnd();
  std::vector<int32_t> table = {3, 0, 7, 1, 5, 2, 6, 4};
  const int32_t q_pos[n_q] = {6, 17, 36};
  kernels::KvBlocks kv{k.data(), v.data(), table.data(), bs};
  for (kernels::Isa isa : ferry::testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    std::vector<float> acc(40, 0.0f);
    kernels::AccumulateAttentionWeights(q.data(), n_q, q_pos, n_heads, n_kv, hd, 0.25f, kv, acc.data());
    std::vector<double> want(40, 0.0);
    for (int t = 0; t < n_q; ++t)
      for (int h = 0; h < n_heads; ++h) {
        std::vector<double> sc;
        for (int p = 0; p <= q_pos[t]; ++p) {
          const float* kr =
              k.data() + (table[static_cast<size_t>(p / bs)] * bs + p % bs) * stride + (h / 3) * hd;
          double d = 0;
          for (int i = 0; i < hd; ++i)
            d += double{q[static_cast<size_t>((t * n_heads + h) * hd + i)]} * kr[i];
          sc.push_back(d * 0.25);
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double z = 0;
        for (double x : sc) z += std::exp(x - mx);
        for (size_t p = 0; p < sc.size(); ++p) want[p] += std::exp(sc[p] - mx) / z;
      }
    double total = 0;
    for (int p = 0; p < 40; ++p) {
      EXPECT_NEAR(acc[static_cast<size_t>(p)], want[static_cast<size_t>(p)], 1e-5)
          << kernels::IsaName(isa) << " key " << p;
      total += acc[static_cast<size_t>(p)];
    }
    EXPECT_NEAR(total, n_q * n_heads, 1e-4);
  }
}

}  // namespace
}  // namespace ferry
