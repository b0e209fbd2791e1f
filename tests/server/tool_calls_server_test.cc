// Tool calling through `ferry serve` on the trained stories260K model (no chat template:
// ChatML, Hermes-style calls): tool_choice required and a named function yield calls valid
// against the tools' schemas, the same whole and streamed; auto is parsed; history with
// calls and tool results renders; unsupported tool fields are 400s that say why.
#include <gtest/gtest.h>

#include "../constraint/json_validator.h"
#include "server_process.h"
#include "test_util.h"

namespace ferry {
namespace {

using testing::HttpResult;
using testing::json;
using testing::Post;
using testing::ServerProcess;

json Tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                    "required": ["city", "days"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time",
     "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
                    "required": ["zone"], "additionalProperties": false}}}])");
}

class ToolCallsServer : public ::testing::Test {
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
  }
  static json Body(json extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "What is the weather?"}}}},
                 {"max_tokens", 200},
                 {"tools", Tools()},
                 {"seed", 3}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return body;
  }
  static json Chat(json extra, int* status = nullptr) {
    HttpResult r = Post(*server_, "/v1/chat/completions", Body(std::move(extra)).dump());
    if (status) *status = r.status;
    return r.Json();
  }
  static void ExpectBadRequest(json extra, const std::string& needle,
                               const char* path = "/v1/chat/completions") {
    HttpResult r = Post(*server_, path, Body(std::move(extra)).dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.Json()["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  }
  // Every call names a tool and its arguments validate against that tool's schema.
  static void ExpectValidCalls(const json& message, const std::string& only = "") {
    ASSERT_TRUE(message["tool_calls"].is_array()) << message.dump();
    ASSERT_FALSE(message["tool_calls"].empty()) << message.dump();
    EXPECT_TRUE(message["content"].is_null()) << message.dump();
    for (const json& c : message["tool_calls"]) {
      EXPECT_EQ(c["type"], "function");
      EXPECT_TRUE(c["id"].get<std::string>().starts_with("call_"));
      const std::string name = c["function"]["name"];
      if (!only.empty()) {
        EXPECT_EQ(name, only);
      }
      json schema;
      for (const json& t : Tools())
        if (t["function"]["name"] == name) schema = t["function"]["parameters"];
      ASSERT_FALSE(schema.is_null()) << "unknown tool " << name;
      ASSERT_TRUE(c["function"]["arguments"].is_string());
      json args = json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
      ASSERT_FALSE(args.is_discarded()) << c.dump();
      EXPECT_TRUE(constraint::testing::Validate(schema, args, schema)) << c.dump();
    }
  }
  static ServerProcess* server_;
};

ServerProcess* ToolCallsServer::server_ = nullptr;

TEST_F(ToolCallsServer, RequiredYieldsValidCalls) {
  for (int seed : {1, 2, 3, 4}) {
    json r = Chat({{"tool_choice", "required"},
                   {"parallel_tool_calls", false},
                   {"seed", seed},
                   {"n", 2},
                   {"temperature", 1.0}});
    ASSERT_EQ(r["choices"].size(), 2u) << r.dump();
    for (const json& c : r["choices"]) {
      EXPECT_EQ(c["finish_reason"], "tool_calls") << r.dump();
      ExpectValidCalls(c["message"]);
      EXPECT_EQ(c["message"]["tool_calls"].size(), 1u);
    }
  }
}

// Parallel calls (the default): one or more, each valid; max_tokens may cut the last one.
TEST_F(ToolCallsServer, RequiredParallelCallsAreEachValid) {
  json r = Chat({{"tool_choice", "required"}, {"seed", 5}, {"temperature", 1.0}});
  json m = r["choices"][0]["message"];
  ASSERT_TRUE(m["tool_calls"].is_array()) << r.dump();
  if (r["choices"][0]["finish_reason"] == "length") {
    m["tool_calls"].erase(m["tool_calls"].size() - 1);
  } else {
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  }
  if (!m["tool_calls"].empty()) ExpectValidCalls(m);
}

TEST_F(ToolCallsServer, NamedFunctionAndNoParallelCalls) {
  json r = Chat({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
                 {"parallel_tool_calls", false}});
  ASSERT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  ExpectValidCalls(r["choices"][0]["message"], "get_time");
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u);
}

// The calls streamed (id, type and name first, then argument fragments that only append)
// fold into exactly the non-streamed calls.
TEST_F(ToolCallsServer, StreamedCallsEqualWholeCalls) {
  json extra = {
      {"tool_choice", "required"}, {"parallel_tool_calls", false}, {"seed", 11}, {"temperature", 0.9}};
  json whole = Chat(extra)["choices"][0]["message"];
  ExpectValidCalls(whole);
  json body = Body(extra);
  body["stream"] = true;
  json calls = json::array();
  std::string finish, content;
  testing::PostStream(*server_, "/v1/chat/completions", body.dump(), [&](const std::string& data) {
    if (data == "[DONE]") return true;
    json e = json::parse(data);
    for (const json& c : e["choices"]) {
      if (c["finish_reason"].is_string()) finish = c["finish_reason"];
      if (c["delta"].contains("content") && c["delta"]["content"].is_string())
        content += c["delta"]["content"];
      if (!c["delta"].contains("tool_calls")) continue;
      for (const json& d : c["delta"]["tool_calls"]) {
        const size_t i = d["index"];
        if (d.contains("id")) {
          EXPECT_EQ(i, calls.size()) << "a call opened out of order";
          EXPECT_EQ(d["type"], "function");
          calls.push_back({{"id", d["id"]}, {"name", d["function"]["name"]}, {"arguments", ""}});
        }
        EXPECT_LT(i, calls.size()) << "arguments before the call's id and name";
        if (i >= calls.size()) return false;
        calls[i]["arguments"] =
            calls[i]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
      }
    }
    return true;
  });
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), whole["tool_calls"].size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i]["name"], whole["tool_calls"][i]["function"]["name"]);
    EXPECT_EQ(calls[i]["arguments"], whole["tool_calls"][i]["function"]["arguments"]);
  }
}

TEST_F(ToolCallsServer, AutoIsParsedAndHistoryWithCallsRenders) {
  json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    {"role": "user", "content": "And tomorrow?"}])");
  int status = 0;
  json r = Chat({{"messages", messages}, {"tool_choice", "auto"}, {"max_tokens", 40}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& m = r["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_string() || m.contains("tool_calls")) << r.dump();
  // The prompt carries the call and its result (ChatML writes calls in Hermes form).
  HttpResult tok = Post(*server_, "/tokenize", json{{"messages", messages}, {"tools", Tools()}}.dump());
  ASSERT_EQ(tok.status, 200) << tok.body;
}

TEST_F(ToolCallsServer, UnsupportedToolFieldsAre400sWithTheReason) {
  ExpectBadRequest({{"tools", nullptr}, {"tool_choice", "required"}}, "needs 'tools'");
  ExpectBadRequest({{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
                   "not in 'tools'");
  ExpectBadRequest({{"tool_choice", "sometimes"}}, "expected none, auto, required");
  ExpectBadRequest({{"tools", {{{"type", "code_interpreter"}}}}}, "only tool type");
  ExpectBadRequest({{"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}}, "names are 1-64");
  ExpectBadRequest({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"examples", 1}}}}}}},
                   "'tools[0].function.examples' is not supported");
  ExpectBadRequest({{"functions", json::array()}}, "deprecated function calling");
  ExpectBadRequest({{"parallel_tool_calls", "yes"}}, "parallel_tool_calls");
  ExpectBadRequest({{"chat_template_kwargs", 3}}, "chat_template_kwargs");
  ExpectBadRequest({{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}},
                   "constrains the output already");
  ExpectBadRequest(
      {{"tools",
        {{{"type", "function"},
          {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"minProperties", 1}}}}}}}},
       {"tool_choice", "required"}},
      "minProperties");
  ExpectBadRequest({{"messages",
                     {{{"role", "assistant"},
                       {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{oops"}}}}}}}}}},
                   "not valid JSON");
  ExpectBadRequest({{"prompt", "hi"}}, "a chat completions field", "/v1/completions");
}

}  // namespace
}  // namespace ferry
