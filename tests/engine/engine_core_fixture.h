// The engine tests' fixture: a tiny synthetic model per test process, a small engine config,
// RunAll (every prompt at once, stepped to the end, all blocks back) and prompt/option makers.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/loaded_model.h"
#include "engine_run.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {

inline std::pair<RequestId, int32_t> K(RequestId id, int32_t branch) {
  return {id, branch};
}

inline std::vector<RequestOutput> StepOk(EngineCore& core) {
  auto outs = core.Step();
  EXPECT_TRUE(outs.ok()) << outs.status().ToString();
  return outs.ok() ? std::move(*outs) : std::vector<RequestOutput>{};
}

class EngineCoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs each test case as its own process, possibly in parallel.
    const std::string path = testing::ScratchPath("engine_core_tiny.gguf");
    auto lm = testing::MakeTinyModel(path);
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = new LoadedModel(std::move(*lm));
  }
  // A failed SetUpTestSuite must fail every test, not skip it.
  void SetUp() override { ASSERT_NE(lm_, nullptr) << "test model could not be made or loaded"; }
  static void TearDownTestSuite() {
    delete lm_;
    lm_ = nullptr;
  }

  static EngineConfig Config() {
    EngineConfig c;
    c.num_blocks = 256;
    c.block_size = 16;
    c.threads = 2;
    c.scheduler.max_batch_tokens = 512;
    c.scheduler.max_num_seqs = 32;
    return c;
  }

  using Run = testing::EngineRun;
  static Run RunAll(const EngineConfig& config, const std::vector<std::vector<int32_t>>& prompts,
                    const std::vector<RequestOptions>& options) {
    return testing::RunEngineToCompletion(*lm_, config, prompts, options);
  }
  static std::vector<int32_t> Prompt(int n, int seed) { return testing::TestPrompt(n, seed); }
  static RequestOptions Greedy(int32_t max_tokens) { return testing::GreedyOptions(max_tokens); }

  // 16 mixed-length prompts (3..120 tokens) with mixed output lengths.
  void Mixed(std::vector<std::vector<int32_t>>& prompts, std::vector<RequestOptions>& opts) {
    for (int i = 0; i < 16; ++i) {
      prompts.push_back(Prompt(3 + (i * 53) % 118, i));
      opts.push_back(Greedy(4 + (i * 7) % 20));
    }
  }

  // Each prompt run alone (its own engine) with the same config.
  std::vector<std::vector<int32_t>> Alone(const EngineConfig& c,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const std::vector<RequestOptions>& opts) {
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < prompts.size(); ++i)
      out.push_back(RunAll(c, {prompts[i]}, {opts[i]}).tokens[K(0, 0)]);
    return out;
  }

  // `prompt` sampled once with n branches (temperature 1.3, seed 100; 37 tokens leave a partly
  // filled last block that every branch copies on write) must give, for each branch b, the
  // tokens of a run of its own with seed 100 + b. Returns the forked run.
  static Run ExpectForkedBranchesEqualOwnRuns(const std::vector<int32_t>& prompt, int32_t n,
                                              int32_t max_tokens, const EngineConfig& config = Config()) {
    RequestOptions o;
    o.sampling.temperature = 1.3f;
    o.sampling.seed = 100;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    o.n = n;
    Run forked = RunAll(config, {prompt}, {o});
    EXPECT_EQ(forked.tokens.size(), static_cast<size_t>(n));
    for (int b = 0; b < n; ++b) {
      RequestOptions single = o;
      single.n = 1;
      single.sampling.seed = 100 + static_cast<uint64_t>(b);
      EXPECT_EQ(forked.tokens[K(0, b)], RunAll(config, {prompt}, {single}).tokens[K(0, 0)]) << "branch " << b;
    }
    return forked;
  }

  static inline LoadedModel* lm_ = nullptr;
};

}  // namespace ferry
