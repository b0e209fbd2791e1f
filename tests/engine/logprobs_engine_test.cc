// Logprobs through the serving engine: one entry per emitted token (also for forked branches),
// the sampled token's own logprob, and greedy picking the top entry.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "engine/engine_core.h"
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

}  // namespace
}  // namespace ferry
