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
  // Small steps (64 tokens) over blocks of 8, in the parameter's K/V type.
  EngineConfig Config() const {
    EngineConfig c;
    c.kv_types = KvCacheTypes{GetParam(), GetParam()};
    c.block_size = kBlock;
    c.num_blocks = 256;
    c.scheduler.max_num_seqs = 16;
    c.scheduler.max_batch_tokens = 64;
    c.threads = 2;
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
  // A 40-token prefix (5 blocks) shared by 6 prompts, two of them forked.
  const testing::RequestSet set =
      testing::SharedPrefixRequests(testing::TestPrompt(40, 7), 6, 2, 19, 31, 30, 9, 700);
  const std::vector<std::vector<int32_t>>& prompts = set.prompts;
  const std::vector<RequestOptions>& opts = set.options;
  EngineConfig small = Config();
  small.num_blocks = 48;  // fewer than the 6 requests' 8 + 10 blocks each: they preempt each other
  // The first request alone, then the rest: they find its prefix blocks cached.
  testing::EngineRun waves =
      testing::RunEngineToCompletion(*lm_, small, prompts, opts, {}, /*first_alone=*/true);
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>>& batched = waves.tokens;
  EXPECT_GE(waves.stats.prefix_hit_tokens, 5 * 40);  // every later request hit the shared prefix's 5 blocks
  EXPECT_GT(waves.stats.preemptions, 0);
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
