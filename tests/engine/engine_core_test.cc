// EngineCore on a tiny synthetic model: batch invariance of outputs (batched == alone, also
// with chunked prefill, preemption and static batching), prefix caching, forks, metrics.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "engine_core_fixture.h"

namespace ferry {
namespace {

TEST_F(EngineCoreTest, BatchedGreedyEqualsAloneAlsoChunkedPreemptedAndStatic) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  EngineConfig c = Config();
  auto alone = Alone(c, prompts, opts);

  EngineConfig chunked = c;
  chunked.scheduler.max_batch_tokens = 40;  // long prompts split over several steps
  EngineConfig tiny = c;
  tiny.num_blocks = 12;  // 192 slots for 16 requests of up to 143 tokens: forces preemption
  tiny.scheduler.max_batch_tokens = 64;
  EngineConfig stat = c;
  stat.scheduler.policy = BatchPolicy::kStatic;
  stat.scheduler.max_num_seqs = 5;
  for (const EngineConfig* cfg : {&c, &chunked, &tiny, &stat}) {
    Run run = RunAll(*cfg, prompts, opts);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(run.tokens[K(static_cast<RequestId>(i), 0)], alone[i]) << "prompt " << i;
      EXPECT_EQ(alone[i].size(), static_cast<size_t>(opts[i].max_tokens));
    }
    if (cfg == &chunked) {
      EXPECT_GT(run.stats.steps, 16);
    }
    if (cfg == &tiny) {
      EXPECT_GT(run.stats.preemptions, 0);
    }
  }
}

TEST_F(EngineCoreTest, PrefixCacheHitsGiveIdenticalOutputsAndSkipPrefill) {
  std::vector<int32_t> shared = Prompt(64, 3);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = shared;
    std::vector<int32_t> tail = Prompt(20 + i, 10 + i);
    p.insert(p.end(), tail.begin() + 1, tail.end());
    prompts.push_back(p);
  }
  std::vector<RequestOptions> opts(4, Greedy(8));
  EngineConfig on = Config(), off = Config();
  off.prefix_caching = false;
  on.scheduler.max_num_seqs = 1;  // one at a time, so later requests find the first's blocks
  off.scheduler.max_num_seqs = 1;
  Run a = RunAll(on, prompts, opts), b = RunAll(off, prompts, opts);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.stats.prefix_hit_tokens, 3 * 64);
  EXPECT_EQ(b.stats.prefix_hit_tokens, 0);
  EXPECT_EQ(b.stats.prefill_tokens_computed - a.stats.prefill_tokens_computed, 3 * 64);
  EXPECT_EQ(a.metrics[K(3, 0)].cached_prompt_tokens, 64);
}

TEST_F(EngineCoreTest, ForkedBranchesEqualIndependentRunsWithBranchSeeds) {
  Run forked = ExpectForkedBranchesEqualOwnRuns(Prompt(37, 5), 4, 24);
  EXPECT_EQ(forked.requests_finished, 1);  // all four branches end in one step: reported once
  std::set<std::vector<int32_t>> distinct;
  for (int b = 0; b < 4; ++b) distinct.insert(forked.tokens[K(0, b)]);
  EXPECT_GT(distinct.size(), 1u);
  // The prompt was computed once for all four branches.
  EXPECT_EQ(forked.stats.prefill_tokens_computed, 37);
}

// The metrics against timestamps the test takes itself around each Add and Step on the
// engine's clock: a token emitted by step k was emitted between the clock readings just before
// and just after step k, so every latency lies in a window the test knows independently.
TEST_F(EngineCoreTest, LatencyMetricsMatchTimestampsTakenByTheTest) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  EngineConfig config = Config();
  config.scheduler.max_batch_tokens = 40;  // prefill over several steps: scheduled != first token
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, config);
  ASSERT_TRUE(core.ok());
  struct Seen {
    double add_lo = 0, add_hi = 0;                 // clock around Add (arrival lies between)
    std::vector<std::pair<double, double>> token;  // [tokens] clock around the emitting step
    RequestMetrics metrics;
  };
  std::map<RequestId, Seen> seen;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Seen& s = seen[static_cast<RequestId>(i)];
    s.add_lo = (*core)->Now();
    (*core)->Add(static_cast<RequestId>(i), prompts[i], opts[i], (*core)->Now());
    s.add_hi = (*core)->Now();
  }
  while ((*core)->HasWork()) {
    const double lo = (*core)->Now();
    std::vector<RequestOutput> outs = StepOk(**core);
    const double hi = (*core)->Now();
    for (const RequestOutput& o : outs) {
      Seen& s = seen[o.id];
      for (size_t t = 0; t < o.token_ids.size(); ++t) s.token.push_back({lo, hi});
      if (o.finished) s.metrics = o.metrics;
    }
  }
  ASSERT_EQ(seen.size(), 16u);
  constexpr double kEps = 1e-9;
  for (const auto& [id, s] : seen) {
    SCOPED_TRACE("request " + std::to_string(id));
    const RequestMetrics& m = s.metrics;
    const size_t n = s.token.size();
    ASSERT_EQ(n, static_cast<size_t>(opts[static_cast<size_t>(id)].max_tokens));
    EXPECT_EQ(m.output_tokens, static_cast<int32_t>(n));
    EXPECT_EQ(m.prompt_tokens, static_cast<int32_t>(prompts[static_cast<size_t>(id)].size()));
    // arrival in [add_lo, add_hi]; first token in step window 0; last token in window n-1.
    EXPECT_GE(m.ttft_s, s.token[0].first - s.add_hi - kEps);
    EXPECT_LE(m.ttft_s, s.token[0].second - s.add_lo + kEps);
    EXPECT_GE(m.e2e_s, s.token[n - 1].first - s.add_hi - kEps);
    EXPECT_LE(m.e2e_s, s.token[n - 1].second - s.add_lo + kEps);
    EXPECT_GE(m.queue_s, 0.0);
    EXPECT_LE(m.queue_s, m.ttft_s);
    ASSERT_EQ(m.itl_s.size(), n - 1);
    for (size_t t = 1; t < n; ++t) {
      EXPECT_GE(m.itl_s[t - 1], s.token[t].first - s.token[t - 1].second - kEps) << "gap " << t;
      EXPECT_LE(m.itl_s[t - 1], s.token[t].second - s.token[t - 1].first + kEps) << "gap " << t;
    }
    // TPOT is the mean gap after the first token: (last - first) / (n - 1), bounded the same way.
    EXPECT_GE(m.tpot_s * static_cast<double>(n - 1), s.token[n - 1].first - s.token[0].second - kEps);
    EXPECT_LE(m.tpot_s * static_cast<double>(n - 1), s.token[n - 1].second - s.token[0].first + kEps);
  }
  EngineStats stats = (*core)->Stats();
  EXPECT_EQ(stats.finished, 16);
  EXPECT_GT(stats.KvWaste(), 0.0);
  EXPECT_LT(stats.KvWaste(), 0.5);
}

TEST_F(EngineCoreTest, StopStringFinishesTheBranch) {
  RequestOptions o = Greedy(30);
  auto prompt = Prompt(10, 1);
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, Config());
  ASSERT_TRUE(core.ok());
  std::string full;
  (*core)->Add(0, prompt, o, 0);
  while ((*core)->HasWork())
    for (const auto& out : StepOk(**core)) full += out.text;
  ASSERT_GE(full.size(), 8u);
  o.stop = {full.substr(full.size() / 2, 3)};
  (*core)->Add(1, prompt, o, 0);
  std::string cut, reason;
  while ((*core)->HasWork())
    for (const auto& out : StepOk(**core)) {
      cut += out.text;
      if (out.finished) reason = out.finish_reason;
    }
  EXPECT_EQ(cut, full.substr(0, full.find(o.stop[0])));
  EXPECT_EQ(reason, "stop");
}

TEST_F(EngineCoreTest, RequestsThatCanNeverRunAreRejected) {
  EngineConfig c = Config();
  c.num_blocks = 4;
  auto core = EngineCore::Create(*lm_->model, &*lm_->tokenizer, c);
  ASSERT_TRUE(core.ok());
  EXPECT_EQ((*core)->Validate(Prompt(60, 1), Greedy(10)).code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE((*core)->Validate({}, Greedy(10)).ok());
  EXPECT_FALSE((*core)->Validate({1, 100000}, Greedy(10)).ok());
  EXPECT_EQ((*core)->Validate(Prompt(10, 1), Greedy(100000)).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace ferry
