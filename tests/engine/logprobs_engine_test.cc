// Logprobs through the serving engine: one entry per emitted token (also for forked branches),
// the sampled token's own logprob, and greedy picking the top entry; prompt logprobs (every
// prompt token scored from the logits before it) against a plain one-token-at-a-time forward
// and against the same tokens generated one at a time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "engine/engine_core.h"
#include "engine_run.h"
#include "model/kv_cache.h"
#include "sampling/logprobs.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

TEST(EngineLogprobsTest, EveryEmittedTokenCarriesItsLogprobs) {
  const std::string path = testing::ScratchPath("engine_logprobs.gguf");
  auto lm = testing::MakeTinyModel(path);
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  EngineConfig config;
  config.num_blocks = 64;
  config.threads = 1;
  auto core = EngineCore::Create(*lm->model, &*lm->tokenizer, config);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  RequestOptions greedy;
  greedy.max_tokens = 6;
  greedy.ignore_eos = true;
  greedy.sampling.temperature = 0;
  greedy.logprobs = 3;
  RequestOptions forked = greedy;
  forked.sampling.temperature = 1.0f;
  forked.sampling.top_k = 0;
  forked.sampling.top_p = 1.0f;
  forked.sampling.min_p = 0;
  forked.sampling.seed = 9;
  forked.n = 3;
  RequestOptions plain = greedy;
  plain.logprobs = -1;
  (*core)->Add(0, {1, 50, 60, 70}, greedy, (*core)->Now());
  (*core)->Add(1, {1, 80, 90}, forked, (*core)->Now());
  (*core)->Add(2, {1, 80, 90}, plain, (*core)->Now());
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>> tokens;
  std::map<std::pair<RequestId, int32_t>, std::vector<TokenLogprobs>> logprobs;
  while ((*core)->HasWork()) {
    auto outs = (*core)->Step();
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    for (const RequestOutput& o : *outs) {
      auto& t = tokens[{o.id, o.branch}];
      t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
      auto& l = logprobs[{o.id, o.branch}];
      l.insert(l.end(), o.logprobs.begin(), o.logprobs.end());
    }
  }
  EXPECT_TRUE((logprobs[{2, 0}].empty()));  // not asked for
  for (auto key : {std::pair<RequestId, int32_t>{0, 0}, {1, 0}, {1, 1}, {1, 2}}) {
    const auto& t = tokens[key];
    const auto& l = logprobs[key];
    ASSERT_EQ(t.size(), 6u);
    ASSERT_EQ(l.size(), t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      ASSERT_EQ(l[i].top.size(), 3u);
      EXPECT_GE(l[i].top[0].logprob, l[i].top[1].logprob);
      EXPECT_LE(l[i].logprob, l[i].top[0].logprob);
      for (const TokenLogprob& alt : l[i].top)
        if (alt.token == t[i]) {
          EXPECT_FLOAT_EQ(alt.logprob, l[i].logprob);
        }
      if (key.first == 0) {
        EXPECT_EQ(l[i].top[0].token, t[i]);  // greedy takes the most likely token
      }
    }
  }
}

// Each prompt token's logprobs from the logits of the position before it, one decode step at
// a time on a plain cache (no engine): [prompt.size() - 1].
std::vector<TokenLogprobs> ScoredOneByOne(const Model& m, const std::vector<int32_t>& prompt, int32_t top) {
  auto kv =
      ContiguousKvCache::Create(m.config().n_layers, 1, 256, m.config().n_kv_heads, m.config().head_dim);
  EXPECT_TRUE(kv.ok());
  std::vector<TokenLogprobs> out;
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));  // [n_vocab]
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    ForwardBatch b;
    b.Add(prompt[p], static_cast<int32_t>(p), 0, true);
    EXPECT_TRUE(m.Forward(b, *kv, logits.data(), nullptr, {}).ok());
    out.push_back(ComputeLogprobs(logits.data(), m.config().n_vocab, prompt[p + 1], top));
  }
  return out;
}

void ExpectSameLogprobs(const TokenLogprobs& got, const TokenLogprobs& want, const std::string& where) {
  EXPECT_NEAR(got.logprob, want.logprob, 1e-4) << where;
  EXPECT_EQ(got.rank, want.rank) << where;
  ASSERT_EQ(got.top.size(), want.top.size()) << where;
  for (size_t k = 0; k < got.top.size(); ++k) {
    EXPECT_EQ(got.top[k].token, want.top[k].token) << where << " top " << k;
    EXPECT_NEAR(got.top[k].logprob, want.top[k].logprob, 1e-4) << where << " top " << k;
  }
}

struct Scored {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs, prompt_logprobs;
  std::string finish_reason;
  int32_t cached_prompt_tokens = -1;
  int outputs_with_prompt_logprobs = 0;
};

// Runs the requests (ids = index) to completion; per (id, branch) what came out.
std::map<std::pair<RequestId, int32_t>, Scored> RunScored(const LoadedModel& lm, EngineConfig config,
                                                          const std::vector<std::vector<int32_t>>& prompts,
                                                          const std::vector<RequestOptions>& options,
                                                          bool one_at_a_time = false) {
  config.threads = 1;
  auto core = EngineCore::Create(*lm.model, &*lm.tokenizer, config);
  EXPECT_TRUE(core.ok()) << core.status().ToString();
  std::map<std::pair<RequestId, int32_t>, Scored> out;
  if (!core.ok()) return out;
  auto drain = [&] {
    while ((*core)->HasWork()) {
      auto outs = (*core)->Step();
      EXPECT_TRUE(outs.ok()) << outs.status().ToString();
      if (!outs.ok()) return;
      for (RequestOutput& o : *outs) {
        Scored& s = out[{o.id, o.branch}];
        s.tokens.insert(s.tokens.end(), o.token_ids.begin(), o.token_ids.end());
        s.logprobs.insert(s.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
        if (!o.prompt_logprobs.empty()) {
          ++s.outputs_with_prompt_logprobs;
          s.prompt_logprobs = o.prompt_logprobs;
        }
        if (o.finished) {
          s.finish_reason = o.finish_reason;
          s.cached_prompt_tokens = o.metrics.cached_prompt_tokens;
        }
      }
    }
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    Status st = (*core)->Validate(prompts[i], options[i]);
    EXPECT_TRUE(st.ok()) << st.ToString();
    (*core)->Add(static_cast<RequestId>(i), prompts[i], options[i], (*core)->Now());
    if (one_at_a_time) drain();
  }
  drain();
  return out;
}

class PromptLogprobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lm_ = new StatusOr<LoadedModel>(
        testing::MakeTinyModel(testing::ScratchPath("engine_prompt_logprobs.gguf")));
    ASSERT_TRUE(lm_->ok()) << lm_->status().ToString();
  }
  static void TearDownTestSuite() {
    delete lm_;
    lm_ = nullptr;
  }
  static const LoadedModel& lm() { return **lm_; }
  static StatusOr<LoadedModel>* lm_;
};
StatusOr<LoadedModel>* PromptLogprobsTest::lm_ = nullptr;

RequestOptions ScoreOnly(int32_t top) {
  RequestOptions o;
  o.max_tokens = 0;
  o.prompt_logprobs = top;
  return o;
}

// What lm-evaluation-harness's loglikelihood tasks send (echo, logprobs, max_tokens 0): every
// prompt token scored, nothing generated. Chunked prefill (4 tokens a pass) splits the prompt.
TEST_F(PromptLogprobsTest, MatchTheTokensGeneratedOneAtATime) {
  const std::vector<int32_t> prompt = {1, 50, 60, 70, 80};
  RequestOptions gen;
  gen.max_tokens = 8;
  gen.ignore_eos = true;
  gen.sampling.temperature = 0;
  gen.logprobs = 3;
  EngineConfig config;
  config.num_blocks = 64;
  config.block_size = 4;
  auto generated = RunScored(lm(), config, {prompt}, {gen});
  const Scored& g = generated[{0, 0}];
  ASSERT_EQ(g.tokens.size(), 8u);

  std::vector<int32_t> all = prompt;
  all.insert(all.end(), g.tokens.begin(), g.tokens.end());
  config.scheduler.max_batch_tokens = 4;
  auto scored = RunScored(lm(), config, {all}, {ScoreOnly(3)});
  const Scored& s = scored[{0, 0}];
  EXPECT_TRUE(s.tokens.empty());
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.outputs_with_prompt_logprobs, 1);
  ASSERT_EQ(s.prompt_logprobs.size(), all.size() - 1);
  // Entry prompt.size() - 1 + j scores the j-th generated token.
  for (size_t j = 0; j < g.tokens.size(); ++j)
    ExpectSameLogprobs(s.prompt_logprobs[prompt.size() - 1 + j], g.logprobs[j],
                       "generated token " + std::to_string(j));
  const std::vector<TokenLogprobs> plain = ScoredOneByOne(*lm().model, all, 3);
  for (size_t p = 0; p < plain.size(); ++p)
    ExpectSameLogprobs(s.prompt_logprobs[p], plain[p], "prompt position " + std::to_string(p));
}

// A prompt whose blocks are cached is still computed whole when its logprobs are asked for, and
// every branch of a forked request gets them on its first output.
TEST_F(PromptLogprobsTest, BypassTheCachedPrefixAndReachEveryBranch) {
  const std::vector<int32_t> prompt = testing::TestPrompt(13, 3);
  RequestOptions warm = testing::GreedyOptions(2);
  RequestOptions forked = testing::GreedyOptions(3);
  forked.n = 2;
  forked.prompt_logprobs = 2;
  EngineConfig config;
  config.num_blocks = 64;
  config.block_size = 4;
  auto runs = RunScored(lm(), config, {prompt, prompt, prompt}, {warm, forked, warm}, /*one_at_a_time=*/true);
  EXPECT_EQ((runs[{1, 0}].cached_prompt_tokens), 0);
  EXPECT_GT((runs[{2, 0}].cached_prompt_tokens), 0);  // the cache itself works
  const std::vector<TokenLogprobs> plain = ScoredOneByOne(*lm().model, prompt, 2);
  for (int32_t branch : {0, 1}) {
    const Scored& s = runs[{1, branch}];
    EXPECT_EQ(s.tokens.size(), 3u);
    EXPECT_EQ(s.outputs_with_prompt_logprobs, 1) << "branch " << branch;
    ASSERT_EQ(s.prompt_logprobs.size(), plain.size()) << "branch " << branch;
    for (size_t p = 0; p < plain.size(); ++p)
      ExpectSameLogprobs(s.prompt_logprobs[p], plain[p], "branch " + std::to_string(branch));
  }
  EXPECT_EQ((runs[{0, 0}].outputs_with_prompt_logprobs), 0);  // not asked for
}

}  // namespace
}  // namespace ferry
