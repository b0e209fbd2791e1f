// Anthropic's /v1/messages and OpenAI's /v1/responses on the suite's server: both are
// translations of chat, so each answer must carry the same text as the chat completion of
// the same (greedy) request, in the other API's shapes and events.
#include "server_fixture.h"

namespace ferry {
namespace {

struct SseEvent {
  std::string name;  // the `event:` line ("" when absent)
  json data;
};

// The whole event stream of a POST, parsed ("event: NAME\ndata: {...}").
std::vector<SseEvent> Events(const std::string& path, const json& body, int* status) {
  HttpResult r = Post(*ServerTest::server(), path, body.dump());
  *status = r.status;
  std::vector<SseEvent> events;
  size_t start = 0;
  for (size_t end; (end = r.body.find("\n\n", start)) != std::string::npos; start = end + 2) {
    SseEvent e;
    std::string block = r.body.substr(start, end - start);
    for (size_t a = 0, b; a < block.size(); a = b + 1) {
      b = block.find('\n', a);
      if (b == std::string::npos) b = block.size();
      const std::string line = block.substr(a, b - a);
      if (line.rfind("event: ", 0) == 0) e.name = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data = json::parse(line.substr(6), nullptr, false);
    }
    events.push_back(std::move(e));
  }
  return events;
}

std::string ChatText(const json& messages, int max_tokens, json stop = nullptr) {
  json body = {{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (!stop.is_null()) body["stop"] = stop;
  HttpResult r = Post(*ServerTest::server(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.Json()["choices"][0]["message"]["content"].get<std::string>();
}

void ExpectAnthropicError(const HttpResult& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], status == 404 ? "not_found_error" : "invalid_request_error") << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

const json kAnthropicReq = {{"max_tokens", 10},
                            {"temperature", 0},
                            {"system", json::array({{{"type", "text"}, {"text", "Be brief."}}})},
                            {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}};
const json kChatMessages = {
    {{"role", "system"}, {"content", json::array({{{"type", "text"}, {"text", "Be brief."}}})}},
    {{"role", "user"}, {"content", "Tell me a story."}}};

TEST_F(ServerTest, AnthropicMessageCarriesTheChatAnswer) {
  HttpResult r = Post(*server(), "/v1/messages", kAnthropicReq.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json m = r.Json();
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "tiny");
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(m["content"][0]["text"], ChatText(kChatMessages, 10));
  EXPECT_TRUE(m["stop_reason"] == "end_turn" || m["stop_reason"] == "max_tokens") << r.body;
  EXPECT_TRUE(m["stop_sequence"].is_null());
  EXPECT_GT(m["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_LE(m["usage"]["output_tokens"].get<int>(), 10);
}

TEST_F(ServerTest, AnthropicStopSequenceIsCutAndNamed) {
  const std::string full = ChatText(kChatMessages, 16);
  // An ASCII character past the start (a random model's text may hold multi-byte ones).
  size_t at = 2;
  while (at < full.size() && (full[at] < 0x21 || full[at] > 0x7e)) ++at;
  ASSERT_LT(at, full.size()) << full;
  const std::string stop = full.substr(at, 1);
  json req = kAnthropicReq;
  req["max_tokens"] = 16;
  req["stop_sequences"] = {stop};
  HttpResult r = Post(*server(), "/v1/messages", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["stop_reason"], "stop_sequence");
  EXPECT_EQ(r.Json()["stop_sequence"], stop);
  EXPECT_EQ(r.Json()["content"][0]["text"], full.substr(0, full.find(stop)));
  // Streamed: the text deltas never contain the stop sequence, and message_delta names it.
  req["stream"] = true;
  int status = 0;
  std::vector<SseEvent> events = Events("/v1/messages", req, &status);
  ASSERT_EQ(status, 200);
  std::string text;
  json delta;
  for (const SseEvent& e : events) {
    if (e.name == "content_block_delta") text += e.data["delta"]["text"].get<std::string>();
    if (e.name == "message_delta") delta = e.data["delta"];
  }
  EXPECT_EQ(text, full.substr(0, full.find(stop)));
  EXPECT_EQ(delta["stop_reason"], "stop_sequence");
  EXPECT_EQ(delta["stop_sequence"], stop);
}

TEST_F(ServerTest, AnthropicStreamSendsItsEventTypesInOrder) {
  json req = kAnthropicReq;
  req["stream"] = true;
  int status = 0;
  std::vector<SseEvent> events = Events("/v1/messages", req, &status);
  ASSERT_EQ(status, 200);
  ASSERT_GE(events.size(), 6u);
  std::vector<std::string> names;
  std::string text;
  for (const SseEvent& e : events) {
    names.push_back(e.name);
    EXPECT_EQ(e.data["type"], e.name);  // the data's type repeats the event name
    if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["delta"]["type"], "text_delta");
      text += e.data["delta"]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(names[0], "message_start");
  EXPECT_EQ(names[1], "ping");
  EXPECT_EQ(names[2], "content_block_start");
  EXPECT_EQ(names[names.size() - 3], "content_block_stop");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(text, ChatText(kChatMessages, 10));
  EXPECT_GT(events[0].data["message"]["usage"]["input_tokens"].get<int>(), 0);
  const json& md = events[events.size() - 2].data;
  EXPECT_TRUE(md["delta"]["stop_reason"] == "end_turn" || md["delta"]["stop_reason"] == "max_tokens");
  EXPECT_GT(md["usage"]["output_tokens"].get<int>(), 0);
}

TEST_F(ServerTest, AnthropicErrorsHaveAnthropicShape) {
  json no_max = kAnthropicReq;
  no_max.erase("max_tokens");
  ExpectAnthropicError(Post(*server(), "/v1/messages", no_max.dump()), 400, "max_tokens");
  json tools = kAnthropicReq;
  tools["tools"] = {{{"type", "bash_20250124"}, {"name", "bash"}}};  // a server tool
  ExpectAnthropicError(Post(*server(), "/v1/messages", tools.dump()), 400, "server tools are not");
  json image = kAnthropicReq;
  image["messages"][0]["content"] = {{{"type", "image"}, {"source", json::object()}}};
  ExpectAnthropicError(Post(*server(), "/v1/messages", image.dump()), 400, "image");
  json hot = kAnthropicReq;
  hot["temperature"] = -1;  // refused by the chat path, answered in Anthropic's shape
  ExpectAnthropicError(Post(*server(), "/v1/messages", hot.dump()), 400, "temperature");
  json other = kAnthropicReq;
  other["model"] = "claude-other";
  ExpectAnthropicError(Post(*server(), "/v1/messages", other.dump()), 404, "claude-other");
  ExpectAnthropicError(Post(*server(), "/v1/messages", "[1]"), 400, "");
}

const json kResponsesReq = {{"instructions", "Be brief."},
                            {"input", "Tell me a story."},
                            {"max_output_tokens", 10},
                            {"temperature", 0}};
const json kResponsesChat = {{{"role", "system"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", "Tell me a story."}}};

TEST_F(ServerTest, ResponsesCarryTheChatAnswer) {
  HttpResult r = Post(*server(), "/v1/responses", kResponsesReq.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["object"], "response");
  EXPECT_TRUE(j["status"] == "completed" || j["status"] == "incomplete");
  EXPECT_EQ(j["status"] == "incomplete", j["incomplete_details"].is_object());
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["role"], "assistant");
  EXPECT_EQ(j["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], ChatText(kResponsesChat, 10));
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());
  // Items with roles and parts equal the string form.
  json items = kResponsesReq;
  items["input"] = {{{"type", "message"},
                     {"role", "user"},
                     {"content", {{{"type", "input_text"}, {"text", "Tell me a story."}}}}}};
  HttpResult ri = Post(*server(), "/v1/responses", items.dump());
  ASSERT_EQ(ri.status, 200) << ri.body;
  EXPECT_EQ(ri.Json()["output"][0]["content"][0]["text"], j["output"][0]["content"][0]["text"]);
}

TEST_F(ServerTest, ResponsesStreamSendsItsEventTypesInOrder) {
  json req = kResponsesReq;
  req["stream"] = true;
  int status = 0;
  std::vector<SseEvent> events = Events("/v1/responses", req, &status);
  ASSERT_EQ(status, 200);
  ASSERT_GE(events.size(), 8u);
  std::vector<std::string> names;
  std::string deltas;
  for (size_t i = 0; i < events.size(); ++i) {
    names.push_back(events[i].name);
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], i);
    if (events[i].name == "response.output_text.delta") deltas += events[i].data["delta"].get<std::string>();
  }
  const std::vector<std::string> head = {"response.created", "response.in_progress",
                                         "response.output_item.added", "response.content_part.added"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 4), head);
  const size_t n = names.size();
  EXPECT_EQ(names[n - 4], "response.output_text.done");
  EXPECT_EQ(names[n - 3], "response.content_part.done");
  EXPECT_EQ(names[n - 2], "response.output_item.done");
  EXPECT_TRUE(names[n - 1] == "response.completed" || names[n - 1] == "response.incomplete") << names[n - 1];
  EXPECT_EQ(deltas, ChatText(kResponsesChat, 10));
  EXPECT_EQ(events[n - 4].data["text"], deltas);
  EXPECT_EQ(events.back().data["response"]["output"][0]["content"][0]["text"], deltas);
}

TEST_F(ServerTest, ResponsesRefuseWhatTheyDoNotSupport) {
  for (const char* field : {"previous_response_id", "tools", "reasoning"}) {
    json req = kResponsesReq;
    req[field] = "x";
    ExpectError(Post(*server(), "/v1/responses", req.dump()), 400, field);
  }
  json store = kResponsesReq;
  store["store"] = true;
  ExpectError(Post(*server(), "/v1/responses", store.dump()), 400, "store");
  store["store"] = false;
  EXPECT_EQ(Post(*server(), "/v1/responses", store.dump()).status, 200);
  json zero = kResponsesReq;
  zero["max_output_tokens"] = 0;
  ExpectError(Post(*server(), "/v1/responses", zero.dump()), 400, "max_output_tokens");
  json image = kResponsesReq;
  image["input"] = {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}};
  ExpectError(Post(*server(), "/v1/responses", image.dump()), 400, "input");
  ExpectError(Post(*server(), "/v1/responses", json{{"instructions", "x"}}.dump()), 400, "input");
}

}  // namespace
}  // namespace ferry
