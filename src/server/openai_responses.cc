#include "server/openai_responses.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <random>

#include "server/response_id.h"

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

ApiError Refused(const std::string& field) {
  return BadRequest(fmt::format("'{}' is not supported by this server's /v1/responses", field), field);
}

// An item's content: a string or input_text / output_text parts.
std::variant<json, ApiError> Content(const json& c) {
  if (c.is_string()) return json(c);
  if (!c.is_array()) return InvalidType("'input' item content must be a string or a list of parts", "input");
  json parts = json::array();
  for (const json& p : c) {
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      return InvalidType("'input' content parts must be objects with a 'type'", "input");
    if (p["type"] != "input_text" && p["type"] != "output_text")
      return BadRequest(
          fmt::format("'input' content part type '{}' is not supported (input_text, output_text)",
                      p["type"].get<std::string>()),
          "input");
    if (!p.contains("text") || !p["text"].is_string())
      return InvalidType("'input' text parts need a string 'text'", "input");
    parts.push_back({{"type", "text"}, {"text", p["text"]}});
  }
  return parts;
}

std::variant<json, ApiError> ToChat(const json& j) {
  static const char* kKnown[] = {"model",       "input",   "instructions", "max_output_tokens",
                                 "temperature", "top_p",   "stream",       "store",
                                 "user",        "metadata"};
  for (const auto& [k, v] : j.items())
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* n) { return k == n; }))
      return Refused(k);
  if (j.contains("store") && j["store"] != false) return Refused("store");  // nothing is kept
  if (j.contains("metadata") && !j["metadata"].is_object())
    return InvalidType("'metadata' must be an object", "metadata");
  json c;
  c["messages"] = json::array();
  if (j.contains("instructions") && !j["instructions"].is_null()) {
    if (!j["instructions"].is_string()) return InvalidType("'instructions' must be a string", "instructions");
    c["messages"].push_back({{"role", "system"}, {"content", j["instructions"]}});
  }
  if (!j.contains("input")) return BadRequest("'input' is required", "input");
  const json& in = j["input"];
  if (in.is_string()) {
    c["messages"].push_back({{"role", "user"}, {"content", in}});
  } else if (in.is_array() && !in.empty()) {
    for (const json& item : in) {
      if (!item.is_object() || !item.contains("role") || !item.contains("content"))
        return InvalidType("'input' items must be messages with 'role' and 'content'", "input");
      if (item.contains("type") && item["type"] != "message")
        return BadRequest("'input' items of a type other than 'message' are not supported", "input");
      const json& role = item["role"];
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        return BadRequest("'input' roles must be user, assistant, system or developer", "input");
      for (const auto& [k, v] : item.items())
        if (k != "role" && k != "content" && k != "type")
          return BadRequest(fmt::format("'input' items: '{}' is not supported", k), "input");
      auto content = Content(item["content"]);
      if (auto* e = std::get_if<ApiError>(&content)) return *e;
      c["messages"].push_back({{"role", role}, {"content", std::get<json>(content)}});
    }
  } else {
    return in.is_array() ? BadRequest("'input' must not be empty", "input")
                         : InvalidType("'input' must be a string or a list of message items", "input");
  }
  // The chat path checks each value's type and range (and names max_tokens for max_output_tokens).
  for (const char* k : {"model", "temperature", "top_p", "stream", "user"})
    if (j.contains(k)) c[k] = j[k];
  if (j.contains("max_output_tokens") && !j["max_output_tokens"].is_null())
    c["max_tokens"] = j["max_output_tokens"];
  if (c.value("stream", false)) c["stream_options"] = {{"include_usage", true}};
  return c;
}

struct Settings {
  json instructions, max_output_tokens, temperature, top_p, metadata;
};

Settings SettingsOf(const json& j) {
  auto get = [&](const char* k, json def) { return j.contains(k) ? j[k] : def; };
  return {get("instructions", nullptr), get("max_output_tokens", nullptr), get("temperature", 1.0),
          get("top_p", 1.0), get("metadata", json::object())};
}

json OutputText(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json MessageItem(const std::string& id, const char* status, json content) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

// The response object; finish: the chat finish_reason ("" while in progress).
json Response(const std::string& id, int64_t created, const std::string& model, const Settings& s,
              const std::string& finish, json output, json usage) {
  const bool done = !finish.empty();
  const bool cut = finish == "length";
  return {{"id", id},
          {"object", "response"},
          {"created_at", created},
          {"status", !done ? "in_progress"
                     : cut ? "incomplete"
                           : "completed"},
          {"error", nullptr},
          {"incomplete_details", cut ? json{{"reason", "max_output_tokens"}} : json()},
          {"instructions", s.instructions},
          {"max_output_tokens", s.max_output_tokens},
          {"model", model},
          {"output", std::move(output)},
          {"parallel_tool_calls", false},
          {"temperature", s.temperature},
          {"tool_choice", "none"},
          {"tools", json::array()},
          {"top_p", s.top_p},
          {"store", false},
          {"metadata", s.metadata},
          {"usage", std::move(usage)}};
}

json Usage(const json& chat_usage) {
  const int64_t in = chat_usage.value("prompt_tokens", int64_t{0});
  const int64_t out = chat_usage.value("completion_tokens", int64_t{0});
  int64_t cached = 0;
  if (chat_usage.contains("prompt_tokens_details") && chat_usage["prompt_tokens_details"].is_object())
    cached = chat_usage["prompt_tokens_details"].value("cached_tokens", int64_t{0});
  return {{"input_tokens", in},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", out},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", in + out}};
}

// Chat chunks -> response.created, response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta ..., response.output_text.done,
// response.content_part.done, response.output_item.done, then response.completed (or
// response.incomplete when max_output_tokens cut it).
class ResponseStream final : public SseTranslator {
 public:
  ResponseStream(std::string model, Settings s) : model_(std::move(model)), settings_(std::move(s)) {}

 private:
  bool Event(const Write& out, const char* type, json data) {
    json e = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : data.items()) e[k] = std::move(v);
    return out(fmt::format("event: {}\ndata: {}\n\n", type, Dump(e)));
  }
  json Part() const { return {{"item_id", item_id_}, {"output_index", 0}, {"content_index", 0}}; }
  bool Start(const Write& out) {
    if (started_) return true;
    started_ = true;
    const json r = Response(id_, created_, model_, settings_, "", json::array(), nullptr);
    json part = Part();
    part["part"] = OutputText("");
    return Event(out, "response.created", {{"response", r}}) &&
           Event(out, "response.in_progress", {{"response", r}}) &&
           Event(out, "response.output_item.added",
                 {{"output_index", 0}, {"item", MessageItem(item_id_, "in_progress", json::array())}}) &&
           Event(out, "response.content_part.added", part);
  }
  bool OnChunk(const json& chunk, const Write& out) override {
    if (chunk.contains("error")) {
      failed_ = true;
      const json& e = chunk["error"];
      return Event(out, "error", {{"code", e["code"]}, {"message", e["message"]}, {"param", e["param"]}});
    }
    if (!Start(out)) return false;
    if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = chunk["usage"];
    for (const json& c : chunk["choices"]) {
      if (c["finish_reason"].is_string()) finish_ = c["finish_reason"].get<std::string>();
      if (!c["delta"].contains("content")) continue;
      const std::string d = c["delta"]["content"].get<std::string>();
      if (d.empty()) continue;
      text_ += d;
      json delta = Part();
      delta["delta"] = d;
      delta["logprobs"] = json::array();
      if (!Event(out, "response.output_text.delta", delta)) return false;
    }
    return true;
  }
  bool OnDone(const Write& out) override {
    if (failed_) return true;  // the error event ended it
    if (!Start(out)) return false;
    json text_done = Part();
    text_done["text"] = text_;
    text_done["logprobs"] = json::array();
    json part_done = Part();
    part_done["part"] = OutputText(text_);
    const json item = MessageItem(item_id_, "completed", json::array({OutputText(text_)}));
    const json r = Response(id_, created_, model_, settings_, finish_.empty() ? "stop" : finish_,
                            json::array({item}), Usage(usage_));
    return Event(out, "response.output_text.done", text_done) &&
           Event(out, "response.content_part.done", part_done) &&
           Event(out, "response.output_item.done", {{"output_index", 0}, {"item", item}}) &&
           Event(out, finish_ == "length" ? "response.incomplete" : "response.completed", {{"response", r}});
  }

  const std::string id_ = NewResponseId("resp_");
  const std::string item_id_ = NewResponseId("msg_");
  const int64_t created_ = static_cast<int64_t>(std::time(nullptr));
  std::string model_;
  Settings settings_;
  int64_t seq_ = 0;     // sequence_number of the next event
  std::string text_;    // the output so far
  std::string finish_;  // the chat finish_reason
  json usage_ = json::object();
  bool started_ = false;
  bool failed_ = false;
};

}  // namespace

Reply OpenAiResponses(CompletionService& chat, std::string_view body) {
  Parsed<json> parsed = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Reply::Error(*e);
  const json& j = std::get<json>(parsed);
  auto translated = ToChat(j);
  if (auto* e = std::get_if<ApiError>(&translated)) return Reply::Error(*e);
  Reply r = chat.ChatCompletions(Dump(std::get<json>(translated)));
  // Errors keep OpenAI's shape; a chat field name that differs here is renamed.
  if (r.status != 200 && !r.stream) {
    json e = json::parse(r.body, nullptr, false);
    if (e.is_object() && e.contains("error") && e["error"]["param"] == "max_tokens") {
      e["error"]["param"] = "max_output_tokens";
      r.body = Dump(e);
    }
    return r;
  }
  if (r.stream) {
    r.translate = std::make_shared<ResponseStream>(r.stream->spec().model, SettingsOf(j));
    return r;
  }
  json c = json::parse(r.body, nullptr, false);
  const json& choice = c["choices"][0];
  const std::string finish = choice["finish_reason"].get<std::string>();
  json item = MessageItem(NewResponseId("msg_"), "completed",
                          json::array({OutputText(choice["message"]["content"])}));
  r.body = Dump(Response(NewResponseId("resp_"), c["created"].get<int64_t>(), c["model"].get<std::string>(),
                         SettingsOf(j), finish, json::array({item}), Usage(c["usage"])));
  return r;
}

}  // namespace ferry::server
