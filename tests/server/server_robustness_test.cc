// `ferry serve` under stress, end to end: a client that disconnects mid-stream frees its KV
// blocks; concurrent streams interleave (continuous batching); a flood past --max-waiting gets
// 503s while every accepted request completes; SIGTERM aborts in-flight streams cleanly and
// exits 0. Waits are generous (loaded machines); nothing asserts on timing.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "server_process.h"
#include "test_util.h"

namespace ferry {
namespace {

using testing::Get;
using testing::HttpResult;
using testing::json;
using testing::Metric;
using testing::Post;
using testing::PostStream;
using testing::ServerProcess;

class ServerRobustnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(testing::ScratchPath("server_robust_tiny.gguf"));
    ASSERT_EQ(testing::RunFerry("make-model --preset tiny --type q8_0 -o " + *model_), 0);
  }
  static void TearDownTestSuite() { delete model_; }
  // Long streams need more positions than the tiny model's 512.
  std::vector<std::string> Args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"-m",        *model_, "--kv-cache-memory", "32M", "--max-model-len", "8192",
                                  "--threads", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static json LongStream(int max_tokens) {
    return {{"prompt", "the cat"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", true}};
  }
  // Polls `done` every 50 ms for up to a minute.
  static bool WaitFor(const std::function<bool()>& done) {
    for (int i = 0; i < 1200; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }
  static std::string* model_;
};
std::string* ServerRobustnessTest::model_ = nullptr;

TEST_F(ServerRobustnessTest, DisconnectMidStreamAbortsAndFreesKvBlocks) {
  ServerProcess s;
  ASSERT_TRUE(s.Start(Args({}))) << s.Log();
  const double baseline = Metric(s, "ferry:kv_cache_used_blocks");
  ASSERT_EQ(baseline, 0);
  int events = 0;
  double used_while_streaming = -1;
  PostStream(s, "/v1/completions", LongStream(4000).dump(), [&](const std::string&) {
    if (++events == 5) used_while_streaming = Metric(s, "ferry:kv_cache_used_blocks");
    return events < 5;  // then hang up
  });
  EXPECT_GT(used_while_streaming, baseline);
  EXPECT_TRUE(WaitFor([&] { return Metric(s, "ferry:kv_cache_used_blocks") == baseline; }))
      << "KV blocks still held after the client left: " << Metric(s, "ferry:kv_cache_used_blocks");
  EXPECT_EQ(Metric(s, "ferry:num_requests_running"), 0);
  HttpResult page = Get(s, "/metrics");
  EXPECT_NE(page.body.find("finished_reason=\"abort\"} 1"), std::string::npos) << page.body;
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

TEST_F(ServerRobustnessTest, ConcurrentStreamsInterleave) {
  ServerProcess s;
  // A must outlast B however slowly B gets going on a loaded machine: the tiny model decodes
  // thousands of tokens a second, so A asks for 30000 (it is cut off once B has ended).
  ASSERT_TRUE(s.Start({"-m", *model_, "--kv-cache-memory", "96M", "--max-model-len", "32768", "--threads", "1"}))
      << s.Log();
  std::mutex mu;
  std::vector<std::string> order;  // "A" / "B" per content event, "B." at B's end
  std::atomic<bool> a_started{false}, stop_a{false};
  std::thread a([&] {
    PostStream(s, "/v1/completions", LongStream(30000).dump(), [&](const std::string& data) {
      if (data == "[DONE]") return true;
      std::lock_guard<std::mutex> l(mu);
      order.push_back("A");
      a_started = true;
      return !stop_a.load();
    });
  });
  ASSERT_TRUE(WaitFor([&] { return a_started.load(); }));
  int b_status = PostStream(s, "/v1/completions", LongStream(400).dump(), [&](const std::string& data) {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(data == "[DONE]" ? "B." : "B");
    return true;
  });
  stop_a = true;
  a.join();
  EXPECT_EQ(b_status, 200);
  // Both progressed before either ended: A produced tokens between B's first token and B's end
  // (B runs 400 tokens, so this does not hang on when the HTTP threads flush A's events).
  std::lock_guard<std::mutex> l(mu);
  auto first_b = std::find(order.begin(), order.end(), "B");
  auto b_end = std::find(order.begin(), order.end(), "B.");
  ASSERT_NE(first_b, order.end());
  ASSERT_NE(b_end, order.end());
  EXPECT_NE(std::find(first_b, b_end, "A"), b_end) << "A made no progress while B streamed";
  EXPECT_TRUE(WaitFor([&] { return Metric(s, "ferry:kv_cache_used_blocks") == 0; }));
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

TEST_F(ServerRobustnessTest, FloodPastMaxWaitingGets503AndAcceptedRequestsComplete) {
  ServerProcess s;
  ASSERT_TRUE(s.Start(Args({"--max-num-seqs", "1", "--max-waiting", "2", "--http-threads", "32"})))
      << s.Log();
  constexpr int kRequests = 16, kTokens = 200;
  std::vector<HttpResult> results(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      results[i] = Post(s, "/v1/completions",
                        json{{"prompt", "the cat"}, {"max_tokens", kTokens}, {"ignore_eos", true}}.dump());
    });
  for (std::thread& t : clients) t.join();
  int ok = 0, overloaded = 0;
  for (const HttpResult& r : results) {
    if (r.status == 200) {
      ++ok;
      EXPECT_EQ(r.Json()["usage"]["completion_tokens"], kTokens) << r.body;
      EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "length");
    } else {
      EXPECT_EQ(r.status, 503) << r.body;
      ++overloaded;
      EXPECT_TRUE(r.Json()["error"]["code"].is_null()) << r.body;  // OpenAI: a string or null
      auto it = r.headers.find("Retry-After");
      EXPECT_TRUE(it != r.headers.end());
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(overloaded, 1);
  EXPECT_EQ(ok + overloaded, kRequests);
  EXPECT_EQ(Get(s, "/health").status, 200);
  EXPECT_EQ(Metric(s, "ferry:num_requests_waiting"), 0);
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

TEST_F(ServerRobustnessTest, SigtermAbortsInFlightStreamsAndExitsZero) {
  ServerProcess s;
  ASSERT_TRUE(s.Start(Args({"--drain-timeout", "0.5"}))) << s.Log();
  std::atomic<bool> started{false};
  std::vector<json> events;
  int status = 0;
  std::thread client([&] {
    status = PostStream(s, "/v1/completions", LongStream(6000).dump(), [&](const std::string& data) {
      events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data, nullptr, false));
      started = true;
      return true;
    });
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
  client.join();
  EXPECT_EQ(status, 200);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "abort");
  EXPECT_NE(s.Log().find("aborting 1 unfinished requests"), std::string::npos) << s.Log();
}

}  // namespace
}  // namespace ferry
