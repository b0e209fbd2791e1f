// The serving engine over a model split across MPI ranks (run by ctest under mpirun as T=2,
// P=2 and T=2 x P=2: --tp=T --pp=P): rank 0 runs EngineCore, leading the other ranks, which run
// RunFollower on their shards; over pipeline stages every step's batch runs as micro-batches
// (engine/micro_batches.h), each stage holding the KV of its own layers only. Every case runs
// the same requests through an engine over the whole model on rank 0 alone and through the
// split one, and the outputs must agree token for token: the mixed-prompt batch (greedy,
// stories260K) plain, with chunked prefill, under preemption and with static batches; prefix
// caching; n > 1 forks sampling on copied-on-write blocks; prompt-lookup speculation; greedy,
// top-k sampled and logprobs requests in one batch (the head's reduced gather); and gemma2/
// gemma3 (sliding-window layers), whose KV groups free the blocks that leave the window on
// every rank alike.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/process_groups.h"
#include "comm/world.h"
#include "engine/engine_core.h"
#include "engine/engine_run.h"
#include "engine/follower.h"
#include "engine/loaded_model.h"
#include "engine/model_runner.h"
#include "engine/tiny_model.h"
#include "test_util.h"

namespace ferry {
namespace {

comm::ProcessGroups* g_groups = nullptr;
int g_tp = 1, g_pp = 1;
const char* kModel = "stories260K.gguf";
using testing::EngineRun;

std::pair<RequestId, int32_t> K(RequestId id, int32_t branch) {
  return {id, branch};
}

EngineConfig Config() {
  EngineConfig c;
  c.num_blocks = 256;
  c.block_size = 16;
  c.threads = 1;  // two ranks on a small machine
  c.scheduler.max_batch_tokens = 512;
  c.scheduler.max_num_seqs = 32;
  return c;
}

// 16 mixed-length prompts (3..120 tokens) with mixed output lengths, as the engine tests use.
void Mixed(std::vector<std::vector<int32_t>>& prompts, std::vector<RequestOptions>& opts) {
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(testing::TestPrompt(3 + (i * 53) % 118, i));
    opts.push_back(testing::GreedyOptions(4 + (i * 7) % 20));
  }
}

class SplitEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveAsset(kModel)) return;
    LoadOptions split;
    split.parallel = {g_groups->tp.get(), g_groups->pp.get()};
    auto s = LoadModel(testing::AssetPath(kModel), split);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    split_ = new LoadedModel(std::move(*s));
    if (g_groups->world->rank() == 0) {
      auto w = LoadModel(testing::AssetPath(kModel), LoadOptions{});
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      whole_ = new LoadedModel(std::move(*w));
    }
  }
  static void TearDownTestSuite() {
    delete split_;
    delete whole_;
  }
  void SetUp() override {
    FERRY_REQUIRE_ASSET(kModel);
    ASSERT_NE(split_, nullptr);
  }

  // Rank 0: the requests through the whole model here, then through the split model leading
  // the followers; returns both runs. Other ranks: follow rank 0's split engine (empty runs).
  static std::pair<EngineRun, EngineRun> RunBoth(EngineConfig c,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 const std::vector<RequestOptions>& opts) {
    if (g_groups->world->rank() != 0) {
      Status st = RunFollower(*split_->model, *g_groups->world, c.threads);
      EXPECT_TRUE(st.ok()) << st.ToString();
      return {};
    }
    EngineRun whole = testing::RunEngineToCompletion(*whole_, c, prompts, opts);
    c.followers = g_groups->world.get();
    EngineRun split = testing::RunEngineToCompletion(*split_, c, prompts, opts);
    return {std::move(whole), std::move(split)};
  }
  static bool Leader() { return g_groups->world->rank() == 0; }

  static inline LoadedModel* split_ = nullptr;
  static inline LoadedModel* whole_ = nullptr;  // rank 0 only
};

TEST_F(SplitEngineTest, MixedBatchEqualsOneProcessAlsoChunkedPreemptedAndStatic) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  EngineConfig plain = Config(), chunked = Config(), tiny = Config(), stat = Config();
  chunked.scheduler.max_batch_tokens = 40;  // long prompts split over several steps
  tiny.num_blocks = 12;  // 192 slots for 16 requests of up to 143 tokens: forces preemption
  tiny.scheduler.max_batch_tokens = 64;
  stat.scheduler.policy = BatchPolicy::kStatic;
  stat.scheduler.max_num_seqs = 5;
  for (const EngineConfig* c : {&plain, &chunked, &tiny, &stat}) {
    auto [whole, split] = RunBoth(*c, prompts, opts);
    if (!Leader()) continue;
    ASSERT_EQ(whole.tokens.size(), prompts.size());
    EXPECT_EQ(split.tokens, whole.tokens);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(split.tokens[K(static_cast<RequestId>(i), 0)].size(),
                static_cast<size_t>(opts[i].max_tokens));
    EXPECT_EQ(split.stats.steps, whole.stats.steps);
    // One micro-batch per step in one process; over stages the prompt steps are cut (the first
    // step's 512 tokens into 8 of 64), decode steps of fewer than 32 tokens are not.
    EXPECT_EQ(whole.stats.micro_batches, whole.stats.steps);
    if (g_pp > 1 && c == &plain) {
      EXPECT_GE(split.stats.micro_batches, split.stats.steps + 7);
    } else if (g_pp == 1) {
      EXPECT_EQ(split.stats.micro_batches, split.stats.steps);
    }
    if (c == &chunked) {
      EXPECT_GT(split.stats.steps, 16);
    }
    if (c == &tiny) {
      EXPECT_GT(split.stats.preemptions, 0);
    }
  }
}

// The prefix cache's RAM and disk tiers over split ranks: they live on rank 0 and keep whole
// blocks (every rank's share of the K/V, gathered when the pool evicts a block and sent back
// to each rank when a prompt hits it). A prompt whose blocks a small pool evicted is served
// from a tier exactly as the split engine serves it from its own pool; a new engine finds the
// disk tier; an engine in one process (another layout) never hits those files; and the disk
// tier's start-up probe (forward passes on every rank) leaves the outputs as they were.
TEST_F(SplitEngineTest, PrefixTiersRestoreEveryRanksShareOfABlock) {
  constexpr int kSplitEngines = 5;  // the engines rank 0 creates below, each followed once
  if (!Leader()) {
    for (int i = 0; i < kSplitEngines; ++i) {
      Status st = RunFollower(*split_->model, *g_groups->world, 1);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    return;
  }
  using testing::ServeOne;
  const std::vector<int32_t> prompt = testing::TestPrompt(100, 1);
  constexpr int32_t kMaxTokens = 16;
  EngineConfig small = Config();  // 12 blocks of 16: one 150-token prompt fills most of it
  small.num_blocks = 12;
  small.scheduler.max_batch_tokens = 64;
  small.scheduler.max_num_seqs = 4;
  small.scheduler.max_seq_len = 256;
  small.followers = g_groups->world.get();
  auto make = [&](const EngineConfig& c, const LoadedModel& lm) {
    auto core = EngineCore::Create(*lm.model, &*lm.tokenizer, c);
    EXPECT_TRUE(core.ok()) << core.status().ToString();
    return core.ok() ? std::move(*core) : nullptr;
  };
  auto flood = [&](EngineCore& core) {  // two other long prompts evict every block of `prompt`
    ServeOne(core, 100, testing::TestPrompt(150, 2), 8);
    ServeOne(core, 101, testing::TestPrompt(150, 3), 8);
  };
  // 1. The split engine's own prefix cache: the prompt's 6 full blocks from its pool.
  EngineConfig big = small;
  big.num_blocks = 64;
  testing::Served fresh, pool_hit;
  {
    auto core = make(big, *split_);
    ASSERT_NE(core, nullptr);
    fresh = ServeOne(*core, 0, prompt, kMaxTokens);
    pool_hit = ServeOne(*core, 1, prompt, kMaxTokens);
    EXPECT_EQ(pool_hit.cached, 96);
  }
  // 2. The RAM tier.
  {
    EngineConfig c = small;
    c.prefix_tiers.ram_bytes = size_t{16} << 20;
    auto core = make(c, *split_);
    ASSERT_NE(core, nullptr);
    testing::ExpectSameServed(ServeOne(*core, 0, prompt, kMaxTokens), fresh);
    flood(*core);
    const testing::Served again = ServeOne(*core, 1, prompt, kMaxTokens);
    EXPECT_EQ(again.cached, 96);
    testing::ExpectSameServed(again, pool_hit);
    EXPECT_EQ(core->Stats().prefix_cache_ram_hits, 6);
  }
  // 3. The disk tier, found again by a new engine.
  const std::string dir = testing::TempDir() + "/split-blocks";
  std::filesystem::remove_all(dir);
  EngineConfig disk = small;
  disk.prefix_tiers.disk_dir = dir;
  disk.prefix_tiers.price_disk = false;  // every block RAM drops is kept: no timing in the outcome
  {
    auto core = make(disk, *split_);
    ASSERT_NE(core, nullptr);
    ServeOne(*core, 0, prompt, kMaxTokens);
    flood(*core);
    EXPECT_GT(core->Stats().prefix_cache_disk_bytes, 0);
  }
  {
    auto core = make(disk, *split_);
    ASSERT_NE(core, nullptr);
    const testing::Served again = ServeOne(*core, 1, prompt, kMaxTokens);
    EXPECT_EQ(again.cached, 96);
    testing::ExpectSameServed(again, pool_hit);
    EXPECT_EQ(core->Stats().prefix_cache_disk_hits, 6);
  }
  // 4. With the probe on: it runs forward passes on every rank before the first request.
  {
    EngineConfig priced = disk;
    priced.prefix_tiers.disk_dir = dir + "-priced";
    priced.prefix_tiers.price_disk = true;
    auto core = make(priced, *split_);
    ASSERT_NE(core, nullptr);
    testing::ExpectSameServed(ServeOne(*core, 0, prompt, kMaxTokens), fresh);
  }
  // 5. One process reads another layout's blocks: its fingerprint differs, so never a hit.
  EngineConfig whole = disk;
  whole.followers = nullptr;
  auto core = make(whole, *whole_);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(ServeOne(*core, 2, prompt, kMaxTokens).cached, 0);
  EXPECT_EQ(core->Stats().prefix_cache_disk_hits, 0);
}

TEST_F(SplitEngineTest, EachStageHoldsTheKvOfItsLayersAndOneMicroBatchAlsoWorks) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  EngineConfig c = Config();
  c.micro_batches.max_count = 1;  // the stages in turn, no overlap
  auto [whole, split] = RunBoth(c, prompts, opts);
  if (!Leader()) return;
  EXPECT_EQ(split.tokens, whole.tokens);
  EXPECT_EQ(split.stats.micro_batches, split.stats.steps);
  // stories260K's 5 layers: stage 0 of 2 computes 3; its blocks hold those (and its KV heads).
  const ModelConfig& w = whole_->model->config();
  const int64_t stage_layers = g_pp == 2 ? 3 : 5;
  const int64_t kv_heads = split_->model->config().n_kv_heads;
  EXPECT_EQ(split.stats.kv_block_bytes * w.n_layers * w.n_kv_heads,
            whole.stats.kv_block_bytes * stage_layers * kv_heads);
}

TEST_F(SplitEngineTest, PrefixCacheHitsForksAndSpeculationEqualOneProcess) {
  // Four prompts sharing 64 tokens, one at a time: the later three reuse the first's blocks.
  const std::vector<int32_t> shared = testing::TestPrompt(64, 3);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = shared;
    std::vector<int32_t> tail = testing::TestPrompt(20 + i, 10 + i);
    p.insert(p.end(), tail.begin() + 1, tail.end());
    prompts.push_back(p);
  }
  EngineConfig one_at_a_time = Config();
  one_at_a_time.scheduler.max_num_seqs = 1;
  auto [whole, split] =
      RunBoth(one_at_a_time, prompts, std::vector<RequestOptions>(4, testing::GreedyOptions(8)));
  if (Leader()) {
    EXPECT_EQ(split.tokens, whole.tokens);
    EXPECT_EQ(split.stats.prefix_hit_tokens, 3 * 64);
  }

  // One request sampled with 4 branches (37 tokens: a partly filled last block that every
  // branch copies on write), and the mixed batch with prompt-lookup drafts verified.
  RequestOptions fork;
  fork.sampling.temperature = 1.3f;
  fork.sampling.seed = 100;
  fork.max_tokens = 24;
  fork.ignore_eos = true;
  fork.n = 4;
  auto [whole_fork, split_fork] = RunBoth(Config(), {testing::TestPrompt(37, 5)}, {fork});
  if (Leader()) {
    EXPECT_EQ(split_fork.tokens.size(), 4u);
    EXPECT_EQ(split_fork.tokens, whole_fork.tokens);
    EXPECT_EQ(split_fork.stats.prefill_tokens_computed, 37);
  }
  std::vector<std::vector<int32_t>> mixed;
  std::vector<RequestOptions> opts;
  Mixed(mixed, opts);
  EngineConfig spec = Config();
  spec.spec.ngram = 3;
  auto [whole_spec, split_spec] = RunBoth(spec, mixed, opts);
  if (Leader()) {
    EXPECT_EQ(split_spec.tokens, whole_spec.tokens);
    EXPECT_GT(split_spec.stats.spec_draft_tokens, 0);
  }
}

TEST_F(SplitEngineTest, SampledAndLogprobsRequestsEqualOneProcess) {
  // The mixed batch with every kind of logits row at once: greedy (the head gathers each rank's
  // argmax), top-k sampled (each rank's top 40 / top 5), no top-k and logprobs (whole rows).
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  for (size_t i = 0; i < opts.size(); ++i) {
    SamplingParams& s = opts[i].sampling;  // greedy (from Mixed) unless changed here
    const SamplingParams defaults;         // top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
    if (i % 4 == 1 || i == 7) s = defaults;
    if (i % 4 == 2) {
      s.temperature = 1.2f;
      s.top_k = i == 14 ? 0 : 5;  // 14: sampled over the whole row
    }
    if (i % 4 == 3) opts[i].logprobs = 3;  // 3 and 11 greedy, 7 top-k sampled, 15 the whole row
    if (i == 15) {
      s = defaults;
      s.top_k = 0;
    }
    s.seed = 1000 + i;
  }
  // An f32 cache: the split's partial sums (W_o, W_down over ranks) change last bits, and an f16
  // cache would round such a K or V value across an f16 step now and then (a 5e-4 relative
  // jump, 1e-3 in a logprob); in f32 the two runs differ by their summation order alone.
  EngineConfig c = Config();
  c.kv_types = KvCacheTypes::F32();
  auto [whole, split] = RunBoth(c, prompts, opts);
  if (!Leader()) return;
  ASSERT_EQ(whole.tokens.size(), prompts.size());
  EXPECT_EQ(split.tokens, whole.tokens);
  for (size_t i = 3; i < prompts.size(); i += 4) {
    const auto& want = whole.logprobs[K(static_cast<RequestId>(i), 0)];
    const auto& got = split.logprobs[K(static_cast<RequestId>(i), 0)];
    ASSERT_EQ(got.size(), static_cast<size_t>(opts[i].max_tokens)) << i;
    ASSERT_EQ(got.size(), want.size()) << i;
    for (size_t t = 0; t < want.size(); ++t) {
      // Normalized over the whole row: a row reduced to its top K would put the sampled token's
      // logprob near 0 and cut the alternatives' mass. Split rounding is about 1e-5.
      EXPECT_NEAR(got[t].logprob, want[t].logprob, 1e-3) << i << " " << t;
      EXPECT_EQ(got[t].rank, want[t].rank) << i << " " << t;
      ASSERT_EQ(got[t].top.size(), 3u);
      for (size_t a = 0; a < 3; ++a)
        EXPECT_NEAR(got[t].top[a].logprob, want[t].top[a].logprob, 1e-3) << i << " " << t;
    }
  }
}

TEST(ModelRunnerSampleTopK, AskForWhatTheSamplersNeed) {
  auto need = [](const RequestOptions& o, std::vector<SamplingParams> forks = {}) {
    Request r(0, 0, {1, 2, 3}, o, Sampler(o.sampling, 512));
    for (const SamplingParams& f : forks) r.fork_samplers.emplace_back(f, 512);
    return ModelRunner::SampleTopK(r);
  };
  RequestOptions o = testing::GreedyOptions(4);
  EXPECT_EQ(need(o), 1);
  o.logprobs = 0;  // logprobs normalize over the whole row
  EXPECT_EQ(need(o), 0);
  o = RequestOptions{};
  EXPECT_EQ(need(o), 40);  // top-k 40 sampling
  SamplingParams wide, whole;
  wide.top_k = 100;
  whole.top_k = 0;
  EXPECT_EQ(need(o, {wide}), 100);  // the branches share the row: the widest need
  EXPECT_EQ(need(o, {wide, whole}), 0);
}

// Sliding-window layers under a split: rank 0's KV groups (full and sliding block
// tables per slot) reach the followers, whose shards free the same out-of-window blocks, and
// the outputs equal one process's, which frees them too, in a pool small enough to preempt.
TEST(SplitEngineSlidingWindow, FreesTheWindowsOnEveryRankAndEqualsOneProcess) {
  const int rank = g_groups->world->rank();
  // Pools small enough that 8 requests of up to 125 positions preempt each other: gemma2's two
  // groups of 2 layers, gemma3's six one-layer groups (blocks of one layer, windows of 32).
  for (const auto& [preset, pool] :
       {std::pair<std::string, int32_t>{"gemma2-tiny", 60}, {"gemma3-tiny", 180}}) {
    SCOPED_TRACE(preset);
    // Each rank writes its own copy (same seed: same bytes) and loads its shard of it.
    const std::string path = testing::ScratchPath("split_" + preset + "_r" + std::to_string(rank) + ".gguf");
    auto whole = testing::MakeTinyModel(path, preset);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    LoadOptions opt;
    opt.parallel = {g_groups->tp.get(), g_groups->pp.get()};
    auto split = LoadModel(path, opt);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    EngineConfig c;
    c.num_blocks = pool;
    c.block_size = 8;
    c.threads = 1;
    c.scheduler.max_batch_tokens = 64;
    c.scheduler.max_num_seqs = 8;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<RequestOptions> opts;
    for (int i = 0; i < 8; ++i) {
      prompts.push_back(testing::TestPrompt(20 + (i * 37) % 70, i));
      opts.push_back(testing::GreedyOptions(30 + (i * 11) % 25));
    }
    if (rank != 0) {
      Status st = RunFollower(*split->model, *g_groups->world, c.threads);
      EXPECT_TRUE(st.ok()) << st.ToString();
      continue;
    }
    const EngineRun one = testing::RunEngineToCompletion(*whole, c, prompts, opts);
    c.followers = g_groups->world.get();
    const EngineRun two = testing::RunEngineToCompletion(*split, c, prompts, opts);
    EXPECT_GT(one.stats.kv_groups, 1);
    EXPECT_EQ(two.stats.kv_groups, one.stats.kv_groups);
    EXPECT_GT(two.stats.kv_window_released_blocks, 0);
    EXPECT_EQ(two.stats.kv_window_released_blocks, one.stats.kv_window_released_blocks);
    EXPECT_GT(two.stats.preemptions, 0);
    ASSERT_EQ(two.tokens.size(), prompts.size());
    EXPECT_EQ(two.tokens, one.tokens);
  }
}

TEST_F(SplitEngineTest, WhatOnlyRankZeroWouldKnowIsRefused) {
  // A KV budget evicts on rank 0's decision; the followers' shards would keep the tokens.
  if (!Leader()) return;  // refused before anything is sent: nothing to follow
  EngineConfig c = Config();
  c.followers = g_groups->world.get();
  c.kv_budget = KvBudgetConfig{};
  c.kv_budget->policy = KvPolicy::kSink;
  c.kv_budget->budget = 64;
  auto core = EngineCore::Create(*split_->model, &*split_->tokenizer, c);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("not supported over split ranks"), std::string::npos)
      << core.status().message();
}

// Embedding requests beside generating ones: the hidden states come from the last stage
// (broadcast back after the logits) and from every tensor rank alike; the pooled vectors equal
// one process's to f32 rounding and the generations token for token. The cache stores f32:
// tensor ranks sum K and V in another order, and with f16 storage one such difference can move
// a stored value by a whole f16 step (2^-11 relative), which the layers above carry into the
// pooled vector as ~2e-5 on the AVX2 table; in f32 the two runs differ by reassociation alone
// (1.3e-7 here).
TEST_F(SplitEngineTest, EmbeddingsBesideGenerationsEqualOneProcess) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  for (Pooling pooling : {Pooling::kMean, Pooling::kLast, Pooling::kCls}) {
    prompts.push_back(testing::TestPrompt(30 + 11 * static_cast<int>(prompts.size()), 20));
    opts.emplace_back().pooling = pooling;
  }
  prompts.push_back(testing::TestPrompt(40, 21));
  opts.push_back(testing::GreedyOptions(6));
  prompts.push_back(testing::TestPrompt(9, 22));
  opts.push_back(testing::GreedyOptions(9));
  EngineConfig config = Config();
  config.kv_types = {.k = DType::kF32, .v = DType::kF32};
  auto [whole, split] = RunBoth(config, prompts, opts);
  if (!Leader()) return;
  EXPECT_EQ(split.tokens, whole.tokens);
  ASSERT_EQ(whole.embeddings.size(), 3u);
  ASSERT_EQ(split.embeddings.size(), 3u);
  for (const auto& [id, want] : whole.embeddings) {
    const std::vector<float>& got = split.embeddings.at(id);
    ASSERT_EQ(got.size(), want.size());
    for (size_t d = 0; d < want.size(); ++d) EXPECT_NEAR(got[d], want[d], 1e-6) << id << " " << d;
  }
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = ferry::comm::OpenWorld({.timeout_s = 30});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tp=", 5) == 0) ferry::g_tp = std::atoi(argv[i] + 5);
    if (std::strncmp(argv[i], "--pp=", 5) == 0) ferry::g_pp = std::atoi(argv[i] + 5);
  }
  auto groups = ferry::comm::MakeProcessGroups(std::move(*world), ferry::g_tp, ferry::g_pp);
  if (!groups.ok()) {
    std::fprintf(stderr, "%s\n", groups.status().ToString().c_str());
    return 1;
  }
  ferry::g_groups = &*groups;
  return RUN_ALL_TESTS();
}
