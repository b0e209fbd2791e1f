// An engine that fails part-way through a request (its model's forward pass errors): a
// non-streamed request gets a 500 in OpenAI's error shape, not 200 with the partial text, and
// a stream ends with an error event and then [DONE] instead of being cut off. The model is
// wrapped in-process so the failure comes at a chosen step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tiny_model.h"
#include "server/completion_service.h"
#include "server/server_metrics.h"
#include "test_util.h"

namespace ferry {
namespace {

using json = nlohmann::json;

// Runs the inner model's first `ok_passes` forward passes, then fails every one.
class FailingModel final : public Model {
 public:
  FailingModel(const Model& inner, int ok_passes) : inner_(inner), ok_passes_(ok_passes) {
    config_ = inner.config();
  }
  Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool,
                 const ForwardOptions& options) const override {
    if (passes_++ >= ok_passes_) return InternalError("injected failure at forward pass {}", passes_);
    return inner_.Forward(batch, kv, logits, pool, options);
  }
  size_t WeightBytes() const override { return inner_.WeightBytes(); }

 private:
  const Model& inner_;
  int ok_passes_;
  mutable int passes_ = 0;  // a test double's counter, touched by the engine loop thread only
};

class EngineFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto lm = testing::MakeTinyModel(testing::TempDir() + "/failing_tiny.gguf");
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = std::make_unique<LoadedModel>(std::move(*lm));
  }
  // A service whose engine fails after 4 forward passes (prefill + 3 decodes).
  void StartService() {
    model_ = std::make_unique<FailingModel>(*lm_->model, 4);
    metrics_ = std::make_unique<server::ServerMetrics>("tiny");
    EngineConfig ec;
    ec.kv_cache_bytes = size_t{8} << 20;
    ec.threads = 1;
    auto client = server::EngineClient::Create(*model_, &*lm_->tokenizer, ec, 16, metrics_.get());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    engine_ = std::move(*client);
    auto chat = server::ChatPrompt::Create(std::nullopt);
    ASSERT_TRUE(chat.ok());
    chat_ = std::move(*chat);
    server::ServingContext ctx;
    ctx.model_name = "tiny";
    ctx.max_model_len = lm_->config().n_ctx_train;
    ctx.tokenizer = &*lm_->tokenizer;
    ctx.engine = engine_.get();
    ctx.chat = chat_.get();
    service_ = std::make_unique<server::CompletionService>(ctx);
  }

  std::unique_ptr<LoadedModel> lm_;
  std::unique_ptr<FailingModel> model_;
  std::unique_ptr<server::ServerMetrics> metrics_;
  std::unique_ptr<server::ChatPrompt> chat_;
  std::unique_ptr<server::EngineClient> engine_;
  std::unique_ptr<server::CompletionService> service_;
};

const char* kRequest = R"({"prompt": "the cat", "max_tokens": 40, "ignore_eos": true, "temperature": 0)";

TEST_F(EngineFailureTest, NonStreamedRequestGetsA500) {
  StartService();
  server::Reply r = service_->Completions(std::string(kRequest) + "}");
  EXPECT_EQ(r.status, 500) << r.body;
  ASSERT_EQ(r.stream, nullptr);
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_EQ(j["error"]["type"], "server_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("injected failure"), std::string::npos) << r.body;
}

TEST_F(EngineFailureTest, StreamEndsWithAnErrorEventThenDone) {
  StartService();
  server::Reply r = service_->Completions(std::string(kRequest) + R"(, "stream": true})");
  ASSERT_NE(r.stream, nullptr) << r.body;
  std::vector<std::string> events;
  const bool complete = r.stream->Stream(
      [&](std::string_view s) {
        events.emplace_back(s);
        return true;
      },
      [] { return true; });
  EXPECT_TRUE(complete);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "data: [DONE]\n\n");
  const std::string& error_event = events[events.size() - 2];
  ASSERT_EQ(error_event.rfind("data: ", 0), 0u) << error_event;
  json err = json::parse(error_event.substr(6), nullptr, false);
  ASSERT_TRUE(err.contains("error")) << error_event;
  EXPECT_EQ(err["error"]["type"], "server_error");
  // Tokens of the passes before the failure were streamed first.
  json first = json::parse(events.front().substr(6), nullptr, false);
  EXPECT_EQ(first["object"], "text_completion") << events.front();
}

}  // namespace
}  // namespace ferry
