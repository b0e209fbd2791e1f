// The suite-shared `ferry serve` on a tiny random-weight model (q8_0, 512 positions, served as
// "tiny") that server_test.cc and server_parity_test.cc drive, with request helpers.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server_process.h"
#include "test_util.h"

namespace ferry {

using testing::Get;
using testing::HttpResult;
using testing::json;
using testing::Post;
using testing::PostStream;
using testing::ServerProcess;

class ServerTest : public ::testing::Test {
 public:
  static ServerProcess* server() { return server_; }
  static HttpResult Completion(const json& body) { return Post(*server_, "/v1/completions", body.dump()); }

 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(testing::ScratchPath("server_tiny.gguf"));
    ASSERT_EQ(testing::RunFerry("make-model --preset tiny --type q8_0 -o " + *model_), 0);
    server_ = new ServerProcess();
    ASSERT_TRUE(server_->Start({"-m", *model_, "--kv-cache-memory", "32M", "--served-model-name", "tiny",
                                "--max-body-bytes", "20000", "--threads", "1"}))
        << server_->Log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Stop(SIGTERM), 0) << server_->Log();
    }
    delete server_;
    delete model_;
  }
  void SetUp() override { ASSERT_TRUE(server_ && server_->port() > 0) << "the server did not start"; }

  static HttpResult Chat(const json& body) { return Post(*server_, "/v1/chat/completions", body.dump()); }
  // The events of a streamed request, parsed; "[DONE]" ends the list as a string.
  static std::vector<json> Stream(const std::string& path, const json& body, int* status = nullptr) {
    std::vector<json> events;
    int st = PostStream(*server_, path, body.dump(), [&](const std::string& data) {
      events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data, nullptr, false));
      return true;
    });
    if (status) *status = st;
    return events;
  }
  static void ExpectError(const HttpResult& r, int status, const std::string& param = "") {
    EXPECT_EQ(r.status, status) << r.body;
    json j = r.Json();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r.body;
    }
  }

  static inline std::string* model_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

// A suite-shared `ferry serve` on the trained stories260K model (no chat template: ChatML);
// every test of the suite skips with a message when the asset is missing. Suite: the derived
// fixture, so each suite has a server of its own.
template <typename Suite>
class TrainedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveAsset("stories260K.gguf")) return;
    server_ = new ServerProcess();
    ASSERT_TRUE(server_->Start(
        {"-m", testing::AssetPath("stories260K.gguf"), "--kv-cache-memory", "16M", "--threads", "1"}))
        << server_->Log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Stop(SIGTERM), 0) << server_->Log();
    }
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!server_) GTEST_SKIP() << "stories260K.gguf not in FERRY_ASSETS";
    ASSERT_GT(server_->port(), 0);
  }
  static inline ServerProcess* server_ = nullptr;
};

}  // namespace ferry
