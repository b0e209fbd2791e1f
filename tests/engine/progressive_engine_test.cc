// Progressive attention (--attn-progressive) inside the batching engine: the paged KV cache
// keeps the INT8 key copy in its own block layout, so batched output equals each request run
// alone, also with chunked prefill, preemption and prefix-shared blocks, and the INT8 pass
// really runs (most K rows are scored from INT8 only).
#include <gtest/gtest.h>

#include "engine_core_fixture.h"

namespace ferry {
namespace {

class ProgressiveEngineTest : public EngineCoreTest {
 protected:
  // Engines of this suite run progressive attention; the suite's model stays as loaded.
  static EngineConfig Config() {
    EngineConfig c = EngineCoreTest::Config();
    SparsityOptions sp;
    sp.attn_progressive = true;
    sp.attn_progressive_margin = 0.5f;  // a random model's scores are close: keep some in INT8
    c.sparsity = sp;
    return c;
  }
};

TEST_F(ProgressiveEngineTest, BatchedEqualsAloneAlsoChunkedPreemptedAndPrefixShared) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  // Two more prompts sharing a 48-token prefix (three full blocks) with the first long one.
  for (int i = 0; i < 2; ++i) {
    std::vector<int32_t> p(prompts[1].begin(), prompts[1].begin() + 48);
    for (int j = 0; j < 10 + i; ++j) p.push_back(7 + 13 * j + i);
    prompts.push_back(p);
    opts.push_back(Greedy(12));
  }
  ASSERT_GE(prompts[1].size(), 48u);
  EngineConfig c = Config();
  auto alone = Alone(c, prompts, opts);

  EngineConfig chunked = c;
  chunked.scheduler.max_batch_tokens = 40;
  EngineConfig tiny = c;
  tiny.num_blocks = 12;  // forces preemption
  tiny.scheduler.max_batch_tokens = 64;
  for (const EngineConfig* cfg : {&c, &chunked, &tiny}) {
    Run run = RunAll(*cfg, prompts, opts);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(run.tokens[K(static_cast<RequestId>(i), 0)], alone[i]) << "request " << i;
    const SparsityStats& s = run.sparsity;
    EXPECT_GT(s.attn_k_rows, 0);
    EXPECT_GT(s.attn_k_rows_f32, 0);
    EXPECT_LT(s.attn_k_rows_f32, s.attn_k_rows);  // the INT8 copy was used, not just allocated
  }
  const SparsityStats& s = RunAll(c, prompts, opts).sparsity;
  EXPECT_GT(s.attn_k_rows, 0);
  EXPECT_GT(s.attn_k_rows_f32, 0);
  EXPECT_LT(s.attn_k_rows_f32, s.attn_k_rows);  // the INT8 copy was used, not just allocated
}

TEST_F(ProgressiveEngineTest, ForkedBranchesCopyThePartialBlocksInt8KeysOnWrite) {
  // 37 prompt tokens: the branches share a partly filled last block, and each branch's first
  // append copies it on write. A copy without the INT8 keys would score those keys as zero.
  Run forked = ExpectForkedBranchesEqualOwnRuns(Prompt(37, 5), 3, 16, Config());
  EXPECT_EQ(forked.stats.prefill_tokens_computed, 37);  // the prompt's blocks really were shared
  const SparsityStats& s = forked.sparsity;
  EXPECT_LT(s.attn_k_rows_f32, s.attn_k_rows);
}

}  // namespace
}  // namespace ferry
