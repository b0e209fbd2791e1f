// Engine: the threaded API — concurrent add_request from several threads, streaming
// callback, abort, WaitIdle, stats — agrees with the single-threaded core.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/loaded_model.h"
#include "engine_run.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

// The tiny model, a 2-thread config, and the streamed tokens and finish reasons per request.
class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto lm = testing::MakeTinyModel(testing::TempDir() + "/tiny.gguf");
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_.emplace(std::move(*lm));
    config_.threads = 2;
  }
  StatusOr<std::unique_ptr<Engine>> Start() {
    return Engine::Create(*lm_->model, &*lm_->tokenizer, config_, [this](const RequestOutput& o) {
      std::lock_guard<std::mutex> l(mu_);
      auto& t = tokens_[o.id];
      t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finished) reasons_[o.id] = o.finish_reason;
    });
  }

  std::optional<LoadedModel> lm_;
  EngineConfig config_;
  std::mutex mu_;  // guards tokens_ and reasons_ (written on the loop thread)
  std::map<RequestId, std::vector<int32_t>> tokens_;
  std::map<RequestId, std::string> reasons_;
};

TEST_F(EngineTest, ConcurrentRequestsStreamAbortAndFinish) {
  config_.num_blocks = 128;
  auto engine = Start();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  RequestOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = 12;
  o.ignore_eos = true;

  std::vector<std::thread> threads;
  std::mutex ids_mu;
  std::map<int, RequestId> ids;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto id = (*engine)->AddRequest("the cat sat " + std::to_string(t), o);
      ASSERT_TRUE(id.ok());
      std::lock_guard<std::mutex> l(ids_mu);
      ids[t] = *id;
    });
  for (auto& th : threads) th.join();
  RequestOptions long_opts = o;
  long_opts.max_tokens = 400;
  auto victim = (*engine)->AddRequest("a long one", long_opts);
  ASSERT_TRUE(victim.ok());
  (*engine)->Abort(*victim);
  EXPECT_FALSE((*engine)->AddRequest(std::vector<int32_t>{}, o).ok());
  (*engine)->WaitIdle();

  std::unique_lock<std::mutex> l(mu_);
  EXPECT_EQ(reasons_[*victim], "abort");
  EXPECT_LT(tokens_[*victim].size(), 400u);
  for (const auto& [t, id] : ids) {
    EXPECT_EQ(tokens_[id].size(), 12u);
    EXPECT_EQ(reasons_[id], "length");
  }
  // Same prompt text, same greedy tokens: what else ran did not matter.
  auto again = (*engine)->AddRequest("the cat sat 0", o);
  ASSERT_TRUE(again.ok());
  l.unlock();
  (*engine)->WaitIdle();
  std::lock_guard<std::mutex> l2(mu_);
  EXPECT_EQ(tokens_[*again], tokens_[ids[0]]);
  EngineStats st = (*engine)->Stats();
  EXPECT_EQ(st.running + st.waiting, 0);
  EXPECT_EQ(st.finished, 5);
  EXPECT_EQ(st.aborted, 1);
}

// An offline batch handed over with AddRequests is one arrival: under static batching the
// threaded engine forms exactly the batches (and takes exactly the steps) of a core that had
// every request before its first step. One AddRequest per request could let the loop start a
// batch with only the first few.
TEST_F(EngineTest, AddRequestsHandsTheWholeBatchOverAtOnce) {
  config_.num_blocks = 256;
  config_.scheduler.policy = BatchPolicy::kStatic;
  config_.scheduler.max_num_seqs = 3;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> options;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(testing::TestPrompt(5 + 7 * i, i));
    options.push_back(testing::GreedyOptions(3 + (i * 5) % 11));
  }
  const testing::EngineRun ref = testing::RunEngineToCompletion(*lm_, config_, prompts, options);
  auto engine = Start();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();

  // All or nothing: one invalid request (an empty prompt) rejects the batch, naming it.
  auto bad_prompts = prompts;
  bad_prompts[5].clear();
  auto bad = (*engine)->AddRequests(bad_prompts, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("request 5"), std::string::npos) << bad.status().ToString();
  EXPECT_FALSE((*engine)->AddRequests(prompts, {options[0]}).ok()) << "count mismatch";
  EXPECT_EQ((*engine)->NumWaiting(), 0);

  auto ids = (*engine)->AddRequests(prompts, options);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), prompts.size());
  (*engine)->WaitIdle();
  const EngineStats st = (*engine)->Stats();
  EXPECT_EQ(st.steps, ref.stats.steps);
  EXPECT_EQ(st.peak_running, 3);
  EXPECT_EQ(st.finished, 8);
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(tokens_[(*ids)[i]], ref.tokens.at({static_cast<RequestId>(i), 0})) << "request " << i;
}

}  // namespace
}  // namespace ferry
