// The prefix cache's RAM and disk tiers end to end on the trained stories260K model (greedy):
// a prompt whose blocks the small KV pool evicted is served again from a tier, restored by
// copy, and gives exactly the tokens and logprobs of the same prompt served from the pool's own
// prefix cache (the same computation path: the same cached blocks, the same tail prefilled);
// the disk tier is found by a new engine on the same folder, never by another KV type, and a
// damaged folder only costs the hits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/engine_core.h"
#include "engine/loaded_model.h"
#include "engine_run.h"
#include "test_util.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

using testing::Served;
using testing::ServeOne;

class PrefixTierEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveAsset("stories260K.gguf")) return;
    auto lm = LoadModel(testing::AssetPath("stories260K.gguf"));
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = new LoadedModel(std::move(*lm));
  }
  static void TearDownTestSuite() {
    delete lm_;
    lm_ = nullptr;
  }
  void SetUp() override { FERRY_REQUIRE_ASSET("stories260K.gguf"); }

  // 12 blocks of 16 tokens: one 150-token prompt and its output fill most of the pool.
  static EngineConfig SmallPool() {
    EngineConfig c;
    c.block_size = 16;
    c.num_blocks = 12;
    c.threads = 1;
    c.scheduler.max_batch_tokens = 64;
    c.scheduler.max_num_seqs = 4;
    c.scheduler.max_seq_len = 256;
    return c;
  }
  static std::unique_ptr<EngineCore> Make(const EngineConfig& c) {
    auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
    EXPECT_TRUE(core.ok()) << core.status().ToString();
    return core.ok() ? std::move(*core) : nullptr;
  }
  // Serving two other long prompts evicts every block of an earlier one from the small pool.
  static void Flood(EngineCore& core) {
    ServeOne(core, 100, testing::TestPrompt(150, 2), 8);
    ServeOne(core, 101, testing::TestPrompt(150, 3), 8);
  }
  // The prompt served twice from a pool large enough to keep it: the second time its 6 full
  // blocks (96 tokens) come from the pool's prefix cache.
  static std::pair<Served, Served> Reference() {
    EngineConfig big = SmallPool();
    big.num_blocks = 64;
    auto core = Make(big);
    Served fresh = ServeOne(*core, 0, Prompt(), kMaxTokens);
    Served hit = ServeOne(*core, 1, Prompt(), kMaxTokens);
    EXPECT_EQ(hit.cached, 96);
    return {fresh, hit};
  }
  static std::vector<int32_t> Prompt() { return testing::TestPrompt(100, 1); }
  static constexpr int32_t kMaxTokens = 16;
  static LoadedModel* lm_;
};
LoadedModel* PrefixTierEngineTest::lm_ = nullptr;

TEST_F(PrefixTierEngineTest, RamTierRestoresEvictedBlocksBitForBit) {
  const auto [fresh, pool_hit] = Reference();
  EngineConfig c = SmallPool();
  c.prefix_tiers.ram_bytes = size_t{16} << 20;
  auto core = Make(c);
  ASSERT_NE(core, nullptr);
  testing::ExpectSameServed(ServeOne(*core, 0, Prompt(), kMaxTokens), fresh);
  Flood(*core);
  EXPECT_GT(core->Stats().prefix_cache_ram_bytes, 0);
  const Served again = ServeOne(*core, 1, Prompt(), kMaxTokens);
  EXPECT_EQ(again.cached, 96);
  testing::ExpectSameServed(again, pool_hit);
  const EngineStats s = core->Stats();
  EXPECT_EQ(s.prefix_cache_ram_hits, 6) << "all six blocks were evicted from the pool and restored from RAM";
  EXPECT_EQ(s.prefix_cache_disk_hits, 0);
  EXPECT_EQ(core->kv_manager().NumFreeBlocks(), core->num_blocks());

  // Without the tier the same sequence recomputes the prompt.
  auto plain = Make(SmallPool());
  ServeOne(*plain, 0, Prompt(), kMaxTokens);
  Flood(*plain);
  EXPECT_EQ(ServeOne(*plain, 1, Prompt(), kMaxTokens).cached, 0);
}

TEST_F(PrefixTierEngineTest, DiskTierSurvivesARestartAndIsKeyedByKvType) {
  const auto [fresh, pool_hit] = Reference();
  const std::string dir = testing::TempDir() + "/blocks";
  fs::remove_all(dir);
  EngineConfig c = SmallPool();
  c.prefix_tiers.disk_dir = dir;  // no RAM tier: evicted blocks go straight to disk
  c.prefix_tiers.price_disk = false;
  {
    auto core = Make(c);
    ASSERT_NE(core, nullptr);
    testing::ExpectSameServed(ServeOne(*core, 0, Prompt(), kMaxTokens), fresh);
    Flood(*core);
    EXPECT_GT(core->Stats().prefix_cache_disk_bytes, 0);
  }
  {  // another KV type: other bytes, another fingerprint, never a hit
    EngineConfig f32 = c;
    f32.kv_types = KvCacheTypes::F32();
    auto core = Make(f32);
    ASSERT_NE(core, nullptr);
    EXPECT_EQ(ServeOne(*core, 0, Prompt(), kMaxTokens).cached, 0);
    EXPECT_EQ(core->Stats().prefix_cache_disk_hits, 0);
    EXPECT_EQ(core->Stats().prefix_cache_disk_rejected, 0);
  }
  auto core = Make(c);  // a restart: a new engine on the same folder
  ASSERT_NE(core, nullptr);
  const Served again = ServeOne(*core, 1, Prompt(), kMaxTokens);
  EXPECT_EQ(again.cached, 96);
  testing::ExpectSameServed(again, pool_hit);
  EXPECT_EQ(core->Stats().prefix_cache_disk_hits, 6);
}

TEST_F(PrefixTierEngineTest, DamagedDiskFilesAreDeletedAndRecomputed) {
  const auto [fresh, pool_hit] = Reference();
  const std::string dir = testing::TempDir() + "/blocks";
  fs::remove_all(dir);
  EngineConfig c = SmallPool();
  c.prefix_tiers.disk_dir = dir;
  c.prefix_tiers.price_disk = false;
  {
    auto core = Make(c);
    ASSERT_NE(core, nullptr);
    ServeOne(*core, 0, Prompt(), kMaxTokens);
    Flood(*core);
  }
  // Flip one byte in the middle of every block file.
  int files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto mid = static_cast<std::streamoff>(fs::file_size(e.path()) / 2);
    f.seekg(mid);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x20);
    f.seekp(mid);
    f.write(&b, 1);
    ++files;
  }
  ASSERT_GT(files, 0);
  auto core = Make(c);
  ASSERT_NE(core, nullptr);
  const Served again = ServeOne(*core, 1, Prompt(), kMaxTokens);
  EXPECT_EQ(again.cached, 0) << "a corrupt block is never restored";
  testing::ExpectSameServed(again, fresh);
  EXPECT_EQ(core->Stats().prefix_cache_disk_hits, 0);
  EXPECT_EQ(core->Stats().prefix_cache_disk_rejected, 1) << "the chain stops at its first bad block";
}

TEST_F(PrefixTierEngineTest, TiersNeedPrefixCaching) {
  EngineConfig c = SmallPool();
  c.prefix_caching = false;
  c.prefix_tiers.ram_bytes = 1 << 20;
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("--no-prefix-caching"), std::string::npos)
      << core.status().message();
}

}  // namespace
}  // namespace ferry
