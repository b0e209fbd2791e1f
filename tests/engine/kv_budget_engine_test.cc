// KV budgets in the serving engine: a budget that never binds changes nothing (bit for bit);
// sink and H2O in the engine equal `ferry run`'s BudgetKvCache path with the same passes;
// long generations stay within their budget's blocks with every block accounted for; outputs
// stay batch-invariant and exact across preemption; what cannot work is refused.
#include <gtest/gtest.h>

#include <set>

#include "engine/beam_search.h"
#include "engine/generator.h"
#include "engine_core_fixture.h"

namespace ferry {
namespace {

class KvBudgetEngineTest : public EngineCoreTest {
 protected:
  static KvBudgetConfig Budget(KvPolicy policy, int32_t budget) {
    KvBudgetConfig b;
    b.policy = policy;
    b.budget = budget;
    return b;
  }

  // Every running request's table holds exactly its kept tokens (<= budget after an eviction
  // point, <= budget + interval before one); no block is in two tables; every block is either
  // in a table or free (nothing cached: prefix caching is off with budgets).
  static void ExpectBlocksAccounted(const EngineCore& core, int32_t budget, int32_t interval) {
    const kv::KvCacheManager& kv = core.kv_manager();
    std::set<kv::BlockId> seen;
    for (const Request* r : core.running()) {
      EXPECT_EQ(r->kv.num_slots(), r->kept.size());
      EXPECT_EQ(static_cast<int32_t>(r->kv.blocks().size()), kv.BlocksFor(r->kept.size()));
      EXPECT_LE(r->kept.size(), budget + interval);
      if (r->num_computed >= r->num_prompt_tokens) {
        EXPECT_LE(r->kept.size(), budget);
      }
      for (kv::BlockId b : r->kv.blocks()) {
        EXPECT_TRUE(seen.insert(b).second) << "block " << b << " in two tables";
        EXPECT_EQ(kv.pool().RefCount(b), 1);
      }
    }
    EXPECT_EQ(kv.pool().NumCached(), 0);
    EXPECT_EQ(static_cast<int32_t>(seen.size()) + kv.NumFreeBlocks(), kv.num_blocks());
  }
};

TEST_F(KvBudgetEngineTest, BudgetThatNeverBindsEqualsUnbudgetedBitForBit) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);  // up to 143 tokens each
  EngineConfig full = Config();
  full.scheduler.max_batch_tokens = 40;  // chunked prefill; eviction points every 40 positions
  Run base = RunAll(full, prompts, opts);
  for (KvPolicy policy : {KvPolicy::kSink, KvPolicy::kH2O}) {
    EngineConfig c = full;
    c.kv_budget = Budget(policy, 160);
    Run run = RunAll(c, prompts, opts);
    EXPECT_EQ(run.tokens, base.tokens) << KvPolicyName(policy);
    EXPECT_EQ(run.stats.kv_evicted_tokens, 0);
    EXPECT_EQ(run.stats.kv_peak_blocks, run.stats.kv_peak_full_blocks);
  }
}

// One sequence through the engine and through Generate (ferry run: BudgetKvCache, prompt
// passes of --batch tokens, then one token per pass) evicts at the same points and keeps the
// same rows in the same slots, so the outputs are identical, for sink and for H2O.
TEST_F(KvBudgetEngineTest, SingleSequenceEqualsFerryRunBudgetPath) {
  const std::vector<int32_t> prompt = Prompt(150, 7);
  const int32_t n_gen = 200, pass = 32;
  for (KvPolicy policy : {KvPolicy::kSink, KvPolicy::kH2O}) {
    SparsityOptions so;
    so.kv_policy = policy;
    so.kv_budget = 64;
    ThreadPool pool(2);
    GenerateOptions g;
    g.n_predict = n_gen;
    g.n_batch = pass;
    g.n_ctx = 512;
    g.ignore_eos = true;
    g.sampling.temperature = 0;
    g.sparsity = so;  // this call only: the suite's model stays as loaded
    std::vector<int32_t> run_ids;
    auto st = Generate(
        *lm_, pool, prompt, g, [](std::string_view) {}, &run_ids);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_GT(st->sparsity.kv_evicted_tokens, 0);

    EngineConfig c = Config();
    c.block_size = 64;  // BudgetKvCache's blocks: the attention kernel's tiles line up the same way
    c.scheduler.max_batch_tokens = 48;  // passes are cut at the eviction points (every 32) anyway
    c.scheduler.kv_evict_interval = pass;
    c.kv_budget = Budget(policy, 64);
    Run engine = RunAll(c, {prompt}, {Greedy(n_gen)});
    EXPECT_EQ(engine.tokens[K(0, 0)], run_ids) << KvPolicyName(policy);
    EXPECT_EQ(engine.stats.kv_evicted_tokens, 150 + n_gen - 1 - 64);
  }
}

TEST_F(KvBudgetEngineTest, LongGenerationsStayWithinBudgetBlocks) {
  const int32_t budget = 64, interval = 32, n_gen = 1100;
  for (KvPolicy policy : {KvPolicy::kSink, KvPolicy::kH2O}) {
    EngineConfig c = Config();
    c.scheduler.max_seq_len = 2048;
    c.scheduler.max_batch_tokens = interval;
    // Room for 4 sequences at budget + one pass; full caches would need 4 x 72 blocks.
    c.num_blocks = 4 * ((budget + interval + 15) / 16);
    c.kv_budget = Budget(policy, budget);
    auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    int64_t expect_evicted = 0;
    for (int i = 0; i < 4; ++i) {
      auto p = Prompt(20 + 13 * i, i);
      ASSERT_TRUE((*core)->Validate(p, Greedy(n_gen)).ok());
      (*core)->Add(i, p, Greedy(n_gen), 0);
      expect_evicted += static_cast<int64_t>(p.size()) + n_gen - 1 - budget;
    }
    std::map<RequestId, int32_t> emitted;
    while ((*core)->HasWork()) {
      for (const RequestOutput& o : StepOk(**core)) emitted[o.id] += static_cast<int32_t>(o.token_ids.size());
      ExpectBlocksAccounted(**core, budget, interval);
      if (::testing::Test::HasFailure()) return;
    }
    EngineStats s = (*core)->Stats();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(emitted[i], n_gen);
    EXPECT_EQ(s.kv_evicted_tokens, expect_evicted) << KvPolicyName(policy);
    // Admission reserved 6 blocks each: all four fit at once and nobody was preempted.
    EXPECT_EQ(s.preemptions, 0);
    EXPECT_EQ(s.peak_running, 4);
    EXPECT_LE(s.kv_peak_blocks, c.num_blocks);
    EXPECT_GE(s.kv_peak_full_blocks, 4 * (n_gen / 16));
    EXPECT_EQ((*core)->kv_manager().NumFreeBlocks(), c.num_blocks);
  }
}

// Eviction points depend on positions only, so a budgeted request's output does not depend on
// its batch, and recomputation after preemption re-runs the same passes: exact (sink). With
// admission reserving each request's bound, nothing is preempted at all.
TEST_F(KvBudgetEngineTest, BatchInvariantAndExactUnderPreemption) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  for (RequestOptions& o : opts) o.max_tokens += 40;  // past the budget while decoding
  EngineConfig c = Config();
  c.scheduler.max_batch_tokens = 64;
  c.scheduler.kv_evict_interval = 16;
  c.kv_budget = Budget(KvPolicy::kSink, 32);
  auto alone = Alone(c, prompts, opts);
  EngineConfig tiny = c;
  tiny.num_blocks = 8;                       // 3 blocks per sequence at most: few run at once, preemption
  tiny.scheduler.kv_budget_reserve = false;  // admit on the first chunk, as unbudgeted engines do
  EngineConfig reserved = tiny;
  reserved.scheduler.kv_budget_reserve = true;  // 3 blocks reserved each: 2 run at once
  Run batched = RunAll(c, prompts, opts), preempted = RunAll(tiny, prompts, opts),
      no_preemption = RunAll(reserved, prompts, opts);
  EXPECT_GT(preempted.stats.preemptions, 0);
  EXPECT_EQ(no_preemption.stats.preemptions, 0);
  EXPECT_EQ(no_preemption.stats.peak_running, 2);
  EXPECT_GT(batched.stats.kv_evicted_tokens, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched.tokens[K(static_cast<RequestId>(i), 0)], alone[i]) << "prompt " << i;
    EXPECT_EQ(preempted.tokens[K(static_cast<RequestId>(i), 0)], alone[i]) << "prompt " << i;
    EXPECT_EQ(no_preemption.tokens[K(static_cast<RequestId>(i), 0)], alone[i]) << "prompt " << i;
    EXPECT_EQ(alone[i].size(), static_cast<size_t>(opts[i].max_tokens));
  }
  // H2O: the kept set depends on summed scores, so only completeness is asserted here.
  tiny.kv_budget = Budget(KvPolicy::kH2O, 32);
  Run h2o = RunAll(tiny, prompts, opts);
  EXPECT_GT(h2o.stats.preemptions, 0);
  EXPECT_EQ(h2o.stats.finished, 16);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(h2o.tokens[K(static_cast<RequestId>(i), 0)].size(), static_cast<size_t>(opts[i].max_tokens));
}

TEST_F(KvBudgetEngineTest, UnsupportedCombinationsAreRefused) {
  EngineConfig c = Config();
  c.kv_budget = Budget(KvPolicy::kSink, 32);
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
  ASSERT_TRUE(core.ok());
  RequestOptions forked = Greedy(8);
  forked.n = 2;
  EXPECT_EQ((*core)->Validate(Prompt(10, 1), forked).code(), StatusCode::kUnsupported);
  EXPECT_TRUE((*core)->Validate(Prompt(10, 1), Greedy(8)).ok());
  // Blocks are counted for budget + one interval, not for every position.
  c.num_blocks = 3;
  c.scheduler.max_seq_len = 4096;
  c.scheduler.max_batch_tokens = 16;
  auto small = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE((*small)->Validate(Prompt(100, 1), Greedy(2000)).ok());

  EngineConfig spec = Config();
  spec.kv_budget = Budget(KvPolicy::kSink, 32);
  spec.spec.ngram = 3;
  EXPECT_EQ(EngineCore::Create(*lm_->model, &*lm_->tokenizer, spec).status().code(),
            StatusCode::kUnsupported);
  EngineConfig bad = Config();
  bad.kv_budget = Budget(KvPolicy::kSink, 32);
  bad.kv_budget->sink_tokens = 40;
  EXPECT_EQ(EngineCore::Create(*lm_->model, &*lm_->tokenizer, bad).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
