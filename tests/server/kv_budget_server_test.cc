// `ferry serve --kv-policy sink --kv-budget 64`: a KV pool too small for a long request's full
// cache still completes it (the budget bounds its blocks), and /metrics reports the evictions.
#include <gtest/gtest.h>
#include <unistd.h>

#include "server_process.h"
#include "test_util.h"

namespace ferry {
namespace {

using testing::HttpResult;
using testing::json;
using testing::Metric;
using testing::Post;
using testing::ServerProcess;

TEST(KvBudgetServerTest, LongRequestCompletesWithinBudgetAndReportsEvictions) {
  const std::string model = testing::ScratchPath("kv_budget_server.gguf");
  ASSERT_EQ(testing::RunFerry("make-model --preset tiny --type q8_0 -o " + model), 0);
  // tiny: 16 KiB per 16-token block, so 256K holds 16 blocks = 256 tokens: less than the
  // request's 400+ positions, more than budget 64 + one 64-token pass.
  ServerProcess s;
  ASSERT_TRUE(s.Start({"-m", model, "--kv-cache-memory", "256K", "--max-batch-tokens", "64", "--kv-policy",
                       "sink", "--kv-budget", "64", "--threads", "1"}))
      << s.Log();
  const json body = {{"prompt", "once upon a time there was a little"},
                     {"max_tokens", 420},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  HttpResult r = Post(s, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body << s.Log();
  const json j = r.Json();
  EXPECT_EQ(j["usage"]["completion_tokens"], 420);
  const int prompt_tokens = j["usage"]["prompt_tokens"].get<int>();
  // The engine publishes its stats after delivering a step's outputs: wait for the last step's
  // (the request's blocks back in the pool) before reading the counters.
  for (int i = 0; i < 500 && Metric(s, "ferry:kv_cache_used_blocks") != 0; ++i) usleep(10000);
  // Every computed position past the budget was evicted once (the last token is never computed).
  EXPECT_EQ(Metric(s, "ferry:kv_evicted_tokens_total"), prompt_tokens + 420 - 1 - 64);
  EXPECT_LE(Metric(s, "ferry:kv_cache_peak_used_blocks"), 8);
  EXPECT_GE(Metric(s, "ferry:kv_cache_peak_full_blocks"), (prompt_tokens + 419) / 16);
  EXPECT_EQ(Metric(s, "ferry:kv_cache_used_blocks"), 0);
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

}  // namespace
}  // namespace ferry
