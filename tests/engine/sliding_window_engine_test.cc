// The batching engine on models with sliding-window layers (gemma2-tiny, gemma3-tiny: window
// 32): their KV groups give back the blocks that leave the window as a sequence advances, the
// pool holds exactly what the windows need, and every output equals the run that keeps every
// block (free_sliding_window_blocks = false), batched or alone, with prefix hits, forks and
// preemption. The KV capacity counts a sequence's windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/prefix_tiers.h"
#include "engine_core_fixture.h"
#include "engine_run.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

constexpr int32_t kBlock = 8;

struct SlidingModel {
  std::string preset;
  int32_t full_groups, sliding_groups;  // what KvGroupLayout makes of its layers
  int32_t small_pool;                   // blocks few enough that 8 requests preempt each other
};

class SlidingWindowEngineTest : public ::testing::TestWithParam<SlidingModel> {
 protected:
  void SetUp() override {
    const std::string path = testing::ScratchPath("sliding_" + GetParam().preset + ".gguf");
    auto lm = testing::MakeTinyModel(path, GetParam().preset);
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = std::make_unique<LoadedModel>(std::move(*lm));
    ASSERT_EQ(lm_->config().sliding_window, 32);
  }

  EngineConfig Config(bool free_blocks) const {
    EngineConfig c;
    c.num_blocks = 512;
    c.block_size = kBlock;
    c.threads = 2;
    c.scheduler.max_batch_tokens = 64;
    c.scheduler.max_num_seqs = 16;
    c.free_sliding_window_blocks = free_blocks;
    return c;
  }
  testing::EngineRun RunAll(const EngineConfig& c, const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<RequestOptions>& options) const {
    return testing::RunEngineToCompletion(*lm_, c, prompts, options);
  }

  std::unique_ptr<LoadedModel> lm_;
};

int32_t Blocks(int64_t n) {
  return static_cast<int32_t>((n + kBlock - 1) / kBlock);
}

// A sequence whose next pass starts at `computed` holds, in each full group, every block, and
// in each sliding group those from the block of position computed - 31 (the window of the next
// query) on.
int32_t ExpectedHeld(const SlidingModel& m, int32_t computed) {
  const int32_t first = std::max(0, computed - 32 + 1) / kBlock;
  return m.full_groups * Blocks(computed) + m.sliding_groups * (Blocks(computed) - first);
}

TEST_P(SlidingWindowEngineTest, LongGenerationHoldsOnlyTheWindowsAndMatchesKeepingEveryBlock) {
  const std::vector<int32_t> prompt = testing::TestPrompt(45, 3);
  const RequestOptions o = testing::GreedyOptions(200);  // 245 positions: over 7 windows
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, Config(true));
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EngineCore& e = **core;
  ASSERT_EQ(e.kv_manager().num_groups(), GetParam().full_groups + GetParam().sliding_groups);
  ASSERT_TRUE(e.Validate(prompt, o).ok());
  e.Add(0, prompt, o, e.Now());
  std::vector<int32_t> tokens;
  int checked = 0;
  while (e.HasWork()) {
    for (const RequestOutput& out : StepOk(e))
      tokens.insert(tokens.end(), out.token_ids.begin(), out.token_ids.end());
    if (e.running().empty()) continue;
    const int32_t computed = e.running()[0]->num_computed;
    ASSERT_EQ(e.num_blocks() - e.kv_manager().NumFreeBlocks(), ExpectedHeld(GetParam(), computed))
        << "after computing " << computed << " positions";
    ++checked;
  }
  EXPECT_GT(checked, 150);
  ASSERT_EQ(tokens.size(), 200u);
  EXPECT_EQ(e.kv_manager().NumFreeBlocks(), e.num_blocks());
  // Every sliding block but the last window's went back while the sequence ran.
  EXPECT_EQ(e.Stats().kv_window_released_blocks, int64_t{GetParam().sliding_groups} * ((244 - 31) / kBlock));

  testing::EngineRun kept = RunAll(Config(false), {prompt}, {o});
  EXPECT_EQ(kept.stats.kv_groups, 1);
  EXPECT_EQ(kept.stats.kv_window_released_blocks, 0);
  EXPECT_EQ(tokens, kept.tokens[K(0, 0)]);
}

TEST_P(SlidingWindowEngineTest, BatchedEqualsAloneWithPrefixHitsForksAndPreemption) {
  // A 70-token prefix shared by every prompt (longer than the window), then a suffix of their own.
  const testing::RequestSet set =
      testing::SharedPrefixRequests(testing::TestPrompt(70, 11), 8, 3, 17, 29, 40, 13, 500);
  const std::vector<std::vector<int32_t>>& prompts = set.prompts;
  const std::vector<RequestOptions>& opts = set.options;
  // Batched in two waves, so the second finds the first's blocks cached, in a pool small
  // enough that the running requests preempt each other.
  EngineConfig small = Config(true);
  small.num_blocks = GetParam().small_pool;
  testing::EngineRun waves =
      testing::RunEngineToCompletion(*lm_, small, prompts, opts, {}, /*first_alone=*/true);
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>>& batched = waves.tokens;
  const EngineStats& s = waves.stats;      // the run checks that every block came back
  EXPECT_GE(s.prefix_hit_tokens, 7 * 64);  // every later request hit the shared prefix's 8 blocks
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.kv_window_released_blocks, 0);

  testing::EngineRun kept = RunAll(Config(false), prompts, opts);
  EXPECT_EQ(kept.stats.preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    testing::EngineRun alone = RunAll(Config(true), {prompts[i]}, {opts[i]});
    for (int32_t b = 0; b < opts[i].n; ++b) {
      const auto key = K(static_cast<RequestId>(i), b);
      ASSERT_EQ(batched[key].size(), static_cast<size_t>(opts[i].max_tokens))
          << "request " << i << " branch " << b;
      EXPECT_EQ(batched[key], alone.tokens[K(0, b)]) << "request " << i << " branch " << b;
      EXPECT_EQ(batched[key], kept.tokens[key]) << "request " << i << " branch " << b;
    }
  }
}

TEST_P(SlidingWindowEngineTest, CapacityCountsTheWindows) {
  const SlidingModel& m = GetParam();
  const int32_t groups = m.full_groups + m.sliding_groups;
  const int32_t layers = lm_->config().n_layers;
  // The bytes of 20 blocks of every layer: 20 blocks when every block is kept, 20 x groups of
  // one group's layers when sliding blocks are freed.
  EngineConfig keep = Config(false), freeing = Config(true);
  keep.num_blocks = freeing.num_blocks = 0;
  keep.scheduler.max_batch_tokens = freeing.scheduler.max_batch_tokens = 16;
  const size_t bytes = 20 * PagedKvCache::BlockBytes(layers, kBlock, lm_->config().n_kv_heads,
                                                     lm_->config().head_dim, keep.kv_types);
  keep.kv_cache_bytes = freeing.kv_cache_bytes = bytes;
  auto kept = EngineCore::Create(*lm_->model, &*lm_->tokenizer, keep);
  auto freed = EngineCore::Create(*lm_->model, &*lm_->tokenizer, freeing);
  ASSERT_TRUE(kept.ok() && freed.ok());
  EXPECT_EQ((*kept)->num_blocks(), 20);
  EXPECT_EQ((*freed)->num_blocks(), 20 * groups);
  const EngineStats ks = (*kept)->Stats(), fs = (*freed)->Stats();
  EXPECT_EQ(ks.kv_groups, 1);
  EXPECT_EQ(fs.kv_groups, groups);
  EXPECT_EQ(fs.kv_block_bytes * groups, ks.kv_block_bytes);
  // A decoding sequence of the 2048-position context (SchedulerConfig's): 256 blocks per full
  // group, and per sliding group the 32 positions of its window, which touch 5 blocks of 8.
  EXPECT_EQ(ks.kv_max_len_blocks, 256);
  EXPECT_EQ(fs.kv_max_len_blocks, 256 * m.full_groups + 5 * m.sliding_groups);

  // 200 positions need 25 blocks of every layer: more than the kept cache has, while with the
  // windows (prefill passes of 16: 47 positions, 7 blocks per sliding group) they fit.
  const std::vector<int32_t> prompt = testing::TestPrompt(20, 5);
  const RequestOptions o = testing::GreedyOptions(180);
  EXPECT_EQ((*kept)->Validate(prompt, o).code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE((*freed)->Validate(prompt, o).ok());
  EXPECT_EQ(25 * m.full_groups + 7 * m.sliding_groups <= 20 * groups, true);
  testing::EngineRun small = RunAll(freeing, {prompt}, {o});
  testing::EngineRun big = RunAll(Config(false), {prompt}, {o});
  ASSERT_EQ(small.tokens[K(0, 0)].size(), 180u);
  EXPECT_EQ(small.tokens[K(0, 0)], big.tokens[K(0, 0)]);
  EXPECT_EQ(small.stats.preemptions, 0);
}

// The prefix cache's RAM tier with sliding KV groups: blocks of every group that the pool
// evicts are kept under their group's hash and restored into that group's table, so a prompt
// seen before hits in full (the full groups' blocks and the sliding groups' window) and gives
// the first run's tokens; without the tier the flood leaves no hit.
TEST_P(SlidingWindowEngineTest, RamTierRestoresEvictedBlocksOfEveryGroup) {
  const std::vector<int32_t> prompt = testing::TestPrompt(70, 21);  // 8 full blocks of 8, then 6
  const RequestOptions o = testing::GreedyOptions(8);
  auto serve = [&](EngineCore& e, RequestId id, const std::vector<int32_t>& p) {
    e.Add(id, p, o, e.Now());
    std::vector<int32_t> tokens;
    while (e.HasWork())
      for (const RequestOutput& out : StepOk(e))
        tokens.insert(tokens.end(), out.token_ids.begin(), out.token_ids.end());
    return tokens;
  };
  for (const bool tier : {true, false}) {
    SCOPED_TRACE(tier ? "RAM tier" : "no tier");
    EngineConfig c = Config(true);
    c.num_blocks = GetParam().small_pool;
    if (tier) c.prefix_tiers.ram_bytes = size_t{16} << 20;
    auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    EngineCore& e = **core;
    ASSERT_EQ(e.kv_manager().num_groups(), GetParam().full_groups + GetParam().sliding_groups);
    const std::vector<int32_t> first = serve(e, 0, prompt);
    ASSERT_EQ(first.size(), 8u);
    for (int i = 0; i < 8; ++i)
      serve(e, 1 + i, testing::TestPrompt(90, 100 + i));  // evicts the prompt's blocks
    const EngineStats before = e.Stats();
    const std::vector<int32_t> again = serve(e, 20, prompt);
    const EngineStats after = e.Stats();
    EXPECT_EQ(again, first);
    EXPECT_GT(after.kv_window_released_blocks, 0);
    EXPECT_EQ(e.kv_manager().NumFreeBlocks(), e.num_blocks());
    if (tier) {
      EXPECT_EQ(after.prefix_hit_tokens - before.prefix_hit_tokens, 64) << "8 blocks: the capped prompt";
      EXPECT_GT(after.prefix_cache_ram_hits, before.prefix_cache_ram_hits);
      // The restored blocks are registered under their group's hash: the next time the pool has them.
      EXPECT_EQ(serve(e, 21, prompt), first);
      EXPECT_EQ(e.Stats().prefix_hit_tokens - after.prefix_hit_tokens, 64);
      EXPECT_EQ(e.Stats().prefix_cache_ram_hits, after.prefix_cache_ram_hits);
    } else {
      EXPECT_EQ(after.prefix_hit_tokens - before.prefix_hit_tokens, 0) << "the flood evicted the prompt";
    }
  }
}

// The disk tier prices a block against its share of a recompute: the start-up passes recompute
// every layer, a block holds one group's. (Only the share is asserted; the times are measured.)
TEST_P(SlidingWindowEngineTest, DiskPriceCountsOneGroupsLayers) {
  const ModelConfig& c = lm_->config();
  const int32_t max_seq_len = 128;
  for (const bool grouped : {true, false}) {
    SCOPED_TRACE(grouped ? "groups" : "one group");
    const KvGroupLayout groups =
        grouped ? KvGroupLayout::ForModel(c, max_seq_len) : KvGroupLayout::Single(c.n_layers);
    ASSERT_EQ(groups.num_groups(), grouped ? GetParam().full_groups + GetParam().sliding_groups : 1);
    auto cache = PagedKvCache::Create(c.n_layers, 32, kBlock, c.n_kv_heads, c.head_dim, 1, max_seq_len,
                                      KvCacheTypes::F32(), groups);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    ThreadPool pool(2);
    const std::string dir = testing::ScratchPath("disk_price_" + GetParam().preset);
    std::filesystem::create_directories(dir);
    auto cost =
        MeasureDiskCost(*lm_->model, *cache, &pool, nullptr, cache->BlockContentBytes(), dir, max_seq_len);
    ASSERT_TRUE(cost.ok()) << cost.status().ToString();
    EXPECT_DOUBLE_EQ(cost->recompute_share, 1.0 / groups.num_groups());
    EXPECT_DOUBLE_EQ(cost->RecomputeSeconds(3),
                     (cost->recompute_base_s + 3 * cost->recompute_per_depth_s) / groups.num_groups());
  }
}

INSTANTIATE_TEST_SUITE_P(Gemma, SlidingWindowEngineTest,
                         ::testing::Values(SlidingModel{"gemma2-tiny", 1, 1, 100},
                                           SlidingModel{"gemma3-tiny", 1, 5, 200}),
                         [](const ::testing::TestParamInfo<SlidingModel>& i) {
                           std::string n = i.param.preset;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ferry
