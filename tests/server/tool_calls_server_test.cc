// Tool calling through `ferry serve` on the trained stories260K model (no chat template:
// ChatML, Hermes-style calls): tool_choice required and a named function yield calls valid
// against the tools' schemas, the same whole and streamed; auto is parsed; history with
// calls and tool results renders; unsupported tool fields are 400s that say why.
#include <gtest/gtest.h>

#include "../constraint/json_validator.h"
#include "server_fixture.h"
#include "server_process.h"
#include "test_util.h"

namespace ferry {
namespace {

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

class ToolCallsServer : public TrainedServerTest<ToolCallsServer> {
 protected:
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
  // The greedy chat answer to `messages` forced to call `name`.
  static json ChatNamed(const json& messages, const std::string& name) {
    return Chat({{"messages", messages},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", name}}}}},
                 {"parallel_tool_calls", false},
                 {"temperature", 0}});
  }
};

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

// /v1/messages: Anthropic tools are chat tools; a forced call comes back as a tool_use block
// (valid against input_schema) with stop_reason tool_use, whole and streamed alike.
json AnthropicTools() {
  json out = json::array();
  for (const json& t : Tools()) {
    out.push_back({{"name", t["function"]["name"]}, {"input_schema", t["function"]["parameters"]}});
    if (t["function"].contains("description")) out.back()["description"] = t["function"]["description"];
  }
  return out;
}

json AnthropicBody(json extra) {
  json body = {{"max_tokens", 200},
               {"temperature", 0},
               {"tools", AnthropicTools()},
               {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
               {"messages", {{{"role", "user"}, {"content", "What is the weather?"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The blocks of a streamed Anthropic message, folded (text deltas and input_json_delta).
json FoldAnthropicStream(const ServerProcess& server, const json& body, std::string* stop_reason) {
  json blocks = json::array();
  std::vector<std::string> partial;
  testing::PostStream(server, "/v1/messages", body.dump(), [&](const std::string& data) {
    json e = json::parse(data);
    if (e["type"] == "content_block_start") {
      EXPECT_EQ(e["index"], blocks.size()) << data;
      blocks.push_back(e["content_block"]);
      partial.emplace_back();
    } else if (e["type"] == "content_block_delta") {
      EXPECT_EQ(e["index"], blocks.size() - 1) << data;
      const json& d = e["delta"];
      if (d["type"] == "input_json_delta") partial.back() += d["partial_json"].get<std::string>();
      if (d["type"] == "text_delta")
        blocks.back()["text"] = blocks.back()["text"].get<std::string>() + d["text"].get<std::string>();
    } else if (e["type"] == "message_delta") {
      *stop_reason = e["delta"]["stop_reason"];
    }
    return true;
  });
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i]["type"] == "tool_use") blocks[i]["input"] = json::parse(partial[i]);
  return blocks;
}

TEST_F(ToolCallsServer, AnthropicToolUseWholeAndStreamed) {
  HttpResult r = Post(*server_, "/v1/messages", AnthropicBody({}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json m = r.Json();
  EXPECT_EQ(m["stop_reason"], "tool_use") << r.body;
  ASSERT_EQ(m["content"].size(), 1u) << r.body;  // the call only: no empty text block
  const json& use = m["content"][0];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_TRUE(use["id"].is_string() && !use["id"].get<std::string>().empty());
  // The same call as the chat completion of the same greedy request.
  json chat = Chat({{"tool_choice", "required"}, {"parallel_tool_calls", false}, {"temperature", 0}});
  const json& call = chat["choices"][0]["message"]["tool_calls"][0];
  ExpectValidCalls(chat["choices"][0]["message"]);
  EXPECT_EQ(use["name"], call["function"]["name"]);
  EXPECT_EQ(use["input"], json::parse(call["function"]["arguments"].get<std::string>()));

  json body = AnthropicBody({{"stream", true}});
  std::string stop_reason;
  json blocks = FoldAnthropicStream(*server_, body, &stop_reason);
  EXPECT_EQ(stop_reason, "tool_use");
  ASSERT_EQ(blocks.size(), 1u) << blocks.dump();
  EXPECT_EQ(blocks[0]["type"], "tool_use");
  EXPECT_EQ(blocks[0]["name"], use["name"]);
  EXPECT_EQ(blocks[0]["input"], use["input"]);
}

// History with tool_use and tool_result blocks renders as the chat history of the same
// calls (the same prompt), and tool_choice {type: tool} names the function.
TEST_F(ToolCallsServer, AnthropicHistoryAndNamedTool) {
  json anthropic = json::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo", "days": 1}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
      {"type": "text", "text": "And the time?"}]}])");
  json chat = json::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Checking."}], "tool_calls": [{"id": "toolu_1",
      "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"days\":1}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny"},
    {"role": "user", "content": [{"type": "text", "text": "And the time?"}]}])");
  HttpResult r = Post(
      *server_, "/v1/messages",
      AnthropicBody(
          {{"messages", anthropic},
           {"tool_choice", {{"type", "tool"}, {"name", "get_time"}, {"disable_parallel_tool_use", true}}}})
          .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json m = r.Json();
  json c = ChatNamed(chat, "get_time");
  EXPECT_EQ(m["usage"]["input_tokens"], c["usage"]["prompt_tokens"]) << r.body;
  ASSERT_FALSE(m["content"].empty()) << r.body;
  for (const json& b : m["content"]) {
    EXPECT_EQ(b["type"], "tool_use") << r.body;
    EXPECT_EQ(b["name"], "get_time") << r.body;
  }
  EXPECT_EQ(
      m["content"][0]["input"],
      json::parse(c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()));
}

TEST_F(ToolCallsServer, AnthropicRefusesWhatItDoesNotTranslate) {
  auto expect400 = [&](json extra, const std::string& needle) {
    HttpResult r = Post(*server_, "/v1/messages", AnthropicBody(std::move(extra)).dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.Json()["type"], "error") << r.body;
    EXPECT_NE(r.Json()["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  };
  expect400({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}, "server tools");
  expect400({{"tools", {{{"name", "f"}}}}}, "input_schema");
  expect400({{"tools", {{{"name", "f"}, {"input_schema", json::object()}, {"strict", true}}}}},
            "tools.strict");
  expect400({{"tool_choice", {{"type", "sometimes"}}}}, "auto, any, tool, none");
  expect400({{"tool_choice", {{"type", "auto"}, {"name", "f"}}}}, "tool_choice.name");
  expect400({{"tool_choice", {{"type", "tool"}}}}, "needs a string 'name'");
  expect400({{"tool_choice", {{"type", "tool"}, {"name", "nope"}}}}, "not in 'tools'");
  expect400(
      {{"messages",
        {{{"role", "user"},
          {"content", {{{"type", "tool_use"}, {"id", "x"}, {"name", "f"}, {"input", json::object()}}}}}}}},
      "not supported in user messages");
  expect400({{"messages", {{{"role", "user"}, {"content", {{{"type", "tool_result"}, {"content", "x"}}}}}}}},
            "tool_use_id");
}

// /v1/responses: function tools; a forced call is a function_call output item, whole and
// streamed (output_item.added, function_call_arguments.delta ..., .done, output_item.done).
json ResponsesTools() {
  json out = json::array();
  for (const json& t : Tools()) {
    out.push_back(
        {{"type", "function"}, {"name", t["function"]["name"]}, {"parameters", t["function"]["parameters"]}});
    if (t["function"].contains("description")) out.back()["description"] = t["function"]["description"];
  }
  return out;
}

json ResponsesBody(json extra) {
  json body = {
      {"input", "What is the weather?"}, {"max_output_tokens", 200},  {"temperature", 0},
      {"tools", ResponsesTools()},       {"tool_choice", "required"}, {"parallel_tool_calls", false}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

TEST_F(ToolCallsServer, ResponsesFunctionCallsWholeAndStreamed) {
  HttpResult r = Post(*server_, "/v1/responses", ResponsesBody({}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json resp = r.Json();
  EXPECT_EQ(resp["status"], "completed");
  EXPECT_EQ(resp["tool_choice"], "required");
  EXPECT_EQ(resp["tools"], ResponsesTools());
  ASSERT_EQ(resp["output"].size(), 1u) << r.body;
  const json& item = resp["output"][0];
  EXPECT_EQ(item["type"], "function_call");
  EXPECT_TRUE(item["call_id"].get<std::string>().starts_with("call_"));
  EXPECT_TRUE(item["id"].get<std::string>().starts_with("fc_"));
  json chat = Chat({{"tool_choice", "required"}, {"parallel_tool_calls", false}, {"temperature", 0}});
  ExpectValidCalls(chat["choices"][0]["message"]);
  const json& call = chat["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(item["name"], call["function"]["name"]);
  EXPECT_EQ(item["arguments"], call["function"]["arguments"]);

  std::vector<std::string> types;
  std::string args, done_args;
  json completed;
  testing::PostStream(*server_, "/v1/responses", ResponsesBody({{"stream", true}}).dump(),
                      [&](const std::string& d) {
                        json e = json::parse(d);
                        types.push_back(e["type"]);
                        if (e["type"] == "response.output_item.added") {
                          EXPECT_EQ(e["item"]["type"], "function_call") << d;
                        }
                        if (e["type"] == "response.function_call_arguments.delta")
                          args += e["delta"].get<std::string>();
                        if (e["type"] == "response.function_call_arguments.done") done_args = e["arguments"];
                        if (e["type"] == "response.completed") completed = e["response"];
                        return true;
                      });
  ASSERT_GE(types.size(), 6u);
  EXPECT_EQ(types[0], "response.created");
  EXPECT_EQ(types[2], "response.output_item.added");
  EXPECT_EQ(types[types.size() - 3], "response.function_call_arguments.done");
  EXPECT_EQ(types[types.size() - 2], "response.output_item.done");
  EXPECT_EQ(types.back(), "response.completed");
  EXPECT_EQ(args, item["arguments"]);
  EXPECT_EQ(done_args, item["arguments"]);
  ASSERT_EQ(completed["output"].size(), 1u);
  EXPECT_EQ(completed["output"][0]["arguments"], item["arguments"]);
  EXPECT_EQ(completed["output"][0]["name"], item["name"]);
}

// function_call and function_call_output input items are the chat history of the same calls.
TEST_F(ToolCallsServer, ResponsesInputItemsWithCalls) {
  json input = json::parse(R"([{"role": "user", "content": "Weather in Oslo?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 1}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
    {"role": "user", "content": "And the time?"}])");
  json chat = json::parse(R"([{"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    {"role": "user", "content": "And the time?"}])");
  HttpResult r =
      Post(*server_, "/v1/responses",
           ResponsesBody({{"input", input}, {"tool_choice", {{"type", "function"}, {"name", "get_time"}}}})
               .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json resp = r.Json();
  json c = ChatNamed(chat, "get_time");
  EXPECT_EQ(resp["usage"]["input_tokens"], c["usage"]["prompt_tokens"]) << r.body;
  ASSERT_EQ(resp["output"].size(), 1u) << r.body;
  EXPECT_EQ(resp["output"][0]["name"], "get_time");
  // The same call (whitespace inside may differ: near-tied logits of the tiny model).
  EXPECT_EQ(
      json::parse(resp["output"][0]["arguments"].get<std::string>()),
      json::parse(c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()));
}

TEST_F(ToolCallsServer, ResponsesRefuseWhatTheyDoNotTranslate) {
  auto expect400 = [&](json extra, const std::string& needle) {
    HttpResult r = Post(*server_, "/v1/responses", ResponsesBody(std::move(extra)).dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.Json()["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  };
  expect400({{"tools", {{{"type", "web_search"}}}}}, "only function tools");
  expect400({{"tools", {{{"type", "function"}, {"name", "f"}, {"examples", 1}}}}}, "tools.examples");
  expect400({{"tool_choice", {{"type", "file_search"}}}}, "tool_choice");
  expect400({{"input", {{{"type", "reasoning"}, {"summary", json::array()}}}}},
            "'reasoning' are not supported");
  expect400({{"input", {{{"type", "function_call_output"}, {"output", "x"}}}}}, "call_id");
}

}  // namespace
}  // namespace ferry
