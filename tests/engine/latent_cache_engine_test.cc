// The batching engine on deepseek2-tiny (multi-head latent attention): its paged cache stores one
// K row per token and layer and no V (KvCacheTypesFor), so a KV budget holds twice the blocks of a
// cache keeping V beside K; every output equals the request run alone, batched with prefix hits,
// forks and preemption, for f16 and q8_0 caches.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine_core_fixture.h"
#include "engine_run.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

constexpr int32_t kBlock = 8;

class LatentCacheEngineTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    auto lm = testing::MakeTinyModel(testing::ScratchPath("latent_deepseek2.gguf"), "deepseek2-tiny");
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = std::make_unique<LoadedModel>(std::move(*lm));
    ASSERT_TRUE(lm_->config().IsMla());
  }
  EngineConfig Config() const {
    EngineConfig c;
    c.num_blocks = 256;
    c.block_size = kBlock;
    c.threads = 2;
    c.scheduler.max_batch_tokens = 64;
    c.scheduler.max_num_seqs = 16;
    c.kv_types = KvCacheTypes{GetParam(), GetParam()};
    return c;
  }
  std::unique_ptr<LoadedModel> lm_;
};

TEST_P(LatentCacheEngineTest, CapacityCountsKeyRowsOnly) {
  const ModelConfig& c = lm_->config();
  EngineConfig cfg = Config();
  cfg.num_blocks = 0;
  const KvCacheTypes both{GetParam(), GetParam()};
  const size_t with_v = PagedKvCache::BlockBytes(c.n_layers, kBlock, c.n_kv_heads, c.head_dim, both);
  cfg.kv_cache_bytes = 20 * with_v;
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, cfg);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EXPECT_EQ((*core)->num_blocks(), 40);  // the bytes of 20 blocks with V are 40 without
  EXPECT_EQ((*core)->Stats().kv_block_bytes * 2, with_v);
}

TEST_P(LatentCacheEngineTest, BatchedEqualsAloneWithPrefixHitsForksAndPreemption) {
  const std::vector<int32_t> shared = testing::TestPrompt(40, 7);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = shared;
    for (int j = 0; j < 2 + 5 * i; ++j) p.push_back(3 + (19 * i + 31 * j) % 500);
    prompts.push_back(p);
    RequestOptions o = testing::GreedyOptions(30 + 9 * i);
    if (i % 3 == 1) {  // forked branches, sampled with seeds seed + b
      o.n = 2;
      o.sampling.temperature = 1.1f;
      o.sampling.seed = 700 + static_cast<uint64_t>(i);
    }
    opts.push_back(o);
  }
  EngineConfig small = Config();
  small.num_blocks = 48;  // fewer than the 6 requests' 8 + 10 blocks each: they preempt each other
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, small);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EngineCore& e = **core;
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>> batched;
  auto run = [&] {
    while (e.HasWork())
      for (const RequestOutput& out : StepOk(e)) {
        auto& t = batched[{out.id, out.branch}];
        t.insert(t.end(), out.token_ids.begin(), out.token_ids.end());
      }
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(e.Validate(prompts[i], opts[i]).ok());
    e.Add(static_cast<RequestId>(i), prompts[i], opts[i], e.Now());
    if (i == 0) run();
  }
  run();
  const EngineStats s = e.Stats();
  EXPECT_GE(s.prefix_hit_tokens, 5 * 40);  // every later request hit the shared prefix's 5 blocks
  EXPECT_GT(s.preemptions, 0);
  EXPECT_EQ(e.kv_manager().NumFreeBlocks(), e.num_blocks());
  for (size_t i = 0; i < prompts.size(); ++i) {
    testing::EngineRun alone = testing::RunEngineToCompletion(*lm_, Config(), {prompts[i]}, {opts[i]});
    for (int32_t b = 0; b < opts[i].n; ++b) {
      const auto key = K(static_cast<RequestId>(i), b);
      ASSERT_EQ(batched[key].size(), static_cast<size_t>(opts[i].max_tokens)) << "request " << i;
      EXPECT_EQ(batched[key], alone.tokens[K(0, b)]) << "request " << i << " branch " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Deepseek2, LatentCacheEngineTest, ::testing::Values(DType::kF16, DType::kQ8_0),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(DTypeName(i.param));
                         });

}  // namespace
}  // namespace ferry
