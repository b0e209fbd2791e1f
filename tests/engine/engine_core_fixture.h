// The engine tests' fixture: a tiny synthetic model per test process, a small engine config,
// RunAll (every prompt at once, stepped to the end, all blocks back) and prompt/option makers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/loaded_model.h"
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
    std::string path = std::filesystem::temp_directory_path().string() + "/ferry_engine_core_tiny_" +
                       std::to_string(getpid()) + ".gguf";
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

  struct Run {
    std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>> tokens;
    std::map<std::pair<RequestId, int32_t>, RequestMetrics> metrics;
    EngineStats stats;
    int requests_finished = 0;  // outputs with request_finished
  };

  // Adds every prompt at once (ids 0..n-1) and steps until done.
  static Run RunAll(const EngineConfig& config, const std::vector<std::vector<int32_t>>& prompts,
                    const std::vector<RequestOptions>& options) {
    auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, config);
    EXPECT_TRUE(core.ok()) << core.status().ToString();
    Run run;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE((*core)->Validate(prompts[i], options[i]).ok());
      (*core)->Add(static_cast<RequestId>(i), prompts[i], options[i], (*core)->Now());
    }
    for (int step = 0; step < 100000 && (*core)->HasWork(); ++step) {
      auto outs = (*core)->Step();
      EXPECT_TRUE(outs.ok()) << outs.status().ToString();
      for (const RequestOutput& o : *outs) {
        auto& t = run.tokens[{o.id, o.branch}];
        t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
        if (o.finished) run.metrics[{o.id, o.branch}] = o.metrics;
        run.requests_finished += o.request_finished ? 1 : 0;
      }
    }
    EXPECT_FALSE((*core)->HasWork());
    run.stats = (*core)->Stats();
    EXPECT_EQ((*core)->kv_manager().NumFreeBlocks(), (*core)->num_blocks());
    return run;
  }

  static std::vector<int32_t> Prompt(int n, int seed) {
    std::vector<int32_t> t = {1};
    for (int i = 1; i < n; ++i) t.push_back(3 + (i * 37 + seed * 101 + i * i * seed) % 500);
    return t;
  }

  static RequestOptions Greedy(int32_t max_tokens) {
    RequestOptions o;
    o.sampling.temperature = 0;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    return o;
  }

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

  static inline LoadedModel* lm_ = nullptr;
};

}  // namespace ferry
