#include "server/anthropic_messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <random>

#include "server/response_id.h"

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

const char* ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json ErrorJson(int status, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", ErrorType(status)}, {"message", message}}}};
}

Reply Error(const ApiError& e) {
  Reply r = Reply::Error(e);
  r.body = Dump(ErrorJson(e.status, e.message));
  return r;
}

ApiError Refused(const std::string& field, const std::string& why = "is not supported") {
  return BadRequest(fmt::format("'{}' {} by this server's /v1/messages", field, why), field);
}

// Text content: a string or a list of text blocks; other block types are refused.
std::variant<json, ApiError> Content(const json& c, const std::string& field) {
  if (c.is_string()) return json(c);
  if (!c.is_array())
    return InvalidType(fmt::format("'{}' must be a string or a list of blocks", field), field);
  json parts = json::array();
  for (const json& b : c) {
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      return InvalidType(fmt::format("'{}' blocks must be objects with a 'type'", field), field);
    if (b["type"] != "text")
      return BadRequest(fmt::format("'{}' block type '{}' is not supported (text only)", field,
                                    b["type"].get<std::string>()),
                        field);
    for (const auto& [k, v] : b.items())
      if (k != "type" && k != "text" && k != "cache_control")  // cache_control: prefix caching is automatic
        return BadRequest(fmt::format("'{}' text blocks: '{}' is not supported", field, k), field);
    if (!b.contains("text") || !b["text"].is_string())
      return InvalidType(fmt::format("'{}' text blocks need a string 'text'", field), field);
    parts.push_back({{"type", "text"}, {"text", b["text"]}});
  }
  return parts;
}

struct Translated {
  json chat;                       // the chat completions request
  std::vector<std::string> stops;  // stop_sequences
};

std::variant<Translated, ApiError> ToChat(const json& j) {
  Translated t;
  json& c = t.chat;
  for (const auto& [k, v] : j.items()) {
    static const char* kKnown[] = {"model",       "max_tokens", "messages", "system", "stop_sequences",
                                   "temperature", "top_p",      "top_k",    "stream", "metadata"};
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* n) { return k == n; }))
      return Refused(k);
  }
  if (!j.contains("max_tokens")) return BadRequest("'max_tokens' is required", "max_tokens");
  if (!j.contains("messages")) return BadRequest("'messages' is required", "messages");
  if (!j["messages"].is_array() || j["messages"].empty())
    return BadRequest("'messages' must be a non-empty list", "messages");
  c["messages"] = json::array();
  if (j.contains("system")) {
    auto sys = Content(j["system"], "system");
    if (auto* e = std::get_if<ApiError>(&sys)) return *e;
    c["messages"].push_back({{"role", "system"}, {"content", std::get<json>(sys)}});
  }
  for (const json& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content"))
      return InvalidType("'messages' entries must be objects with 'role' and 'content'", "messages");
    if (m["role"] != "user" && m["role"] != "assistant")
      return BadRequest("'messages' roles must be 'user' or 'assistant'", "messages");
    for (const auto& [k, v] : m.items())
      if (k != "role" && k != "content")
        return BadRequest(fmt::format("'messages': '{}' is not supported", k), "messages");
    auto content = Content(m["content"], "messages");
    if (auto* e = std::get_if<ApiError>(&content)) return *e;
    c["messages"].push_back({{"role", m["role"]}, {"content", std::get<json>(content)}});
  }
  // The chat path checks each value's type and range and names the field.
  for (const char* k : {"model", "max_tokens", "temperature", "top_p", "top_k", "stream"})
    if (j.contains(k)) c[k] = j[k];
  if (j.contains("metadata")) {  // {"user_id"}: an end-user id, like OpenAI's `user`
    if (!j["metadata"].is_object()) return InvalidType("'metadata' must be an object", "metadata");
    for (const auto& [k, v] : j["metadata"].items())
      if (k != "user_id") return Refused("metadata." + k);
  }
  if (j.contains("stop_sequences")) {
    const json& s = j["stop_sequences"];
    if (!s.is_array()) return InvalidType("'stop_sequences' must be a list of strings", "stop_sequences");
    for (const json& x : s) {
      if (!x.is_string()) return InvalidType("'stop_sequences' must be a list of strings", "stop_sequences");
      t.stops.push_back(x.get<std::string>());
    }
    if (!t.stops.empty()) {
      c["stop"] = s;
      // Kept in the text so that the translation can tell which one ended it (then cuts it).
      c["include_stop_str_in_output"] = true;
    }
  }
  if (c.value("stream", false)) c["stream_options"] = {{"include_usage", true}};
  return t;
}

// The stop sequence `text` ends with, if any (the one that ended it: matching stops at once).
std::optional<std::string> EndingStop(const std::string& text, const std::vector<std::string>& stops) {
  for (const std::string& s : stops)
    if (!s.empty() && text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0)
      return s;
  return std::nullopt;
}

const char* StopReason(const std::string& finish, const std::optional<std::string>& stop) {
  if (stop) return "stop_sequence";
  return finish == "length" ? "max_tokens" : "end_turn";
}

json Message(const std::string& id, const std::string& model, json content, json stop_reason,
             json stop_sequence, json usage) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", std::move(content)},
          {"stop_reason", std::move(stop_reason)},
          {"stop_sequence", std::move(stop_sequence)},
          {"usage", std::move(usage)}};
}

// Chat chunks -> message_start, ping, content_block_start, content_block_delta (text_delta) ...,
// content_block_stop, message_delta (stop_reason, usage), message_stop. Text that could be the
// start of a stop sequence is held back until the end, where a matched one is cut.
class MessageStream final : public SseTranslator {
 public:
  MessageStream(std::string model, int64_t prompt_tokens, std::vector<std::string> stops)
      : model_(std::move(model)), prompt_tokens_(prompt_tokens), stops_(std::move(stops)) {
    for (const std::string& s : stops_) hold_ = std::max(hold_, s.size());
  }

 private:
  static bool Event(const Write& out, const char* name, const json& data) {
    return out(fmt::format("event: {}\ndata: {}\n\n", name, Dump(data)));
  }
  bool Start(const Write& out) {
    if (started_) return true;
    started_ = true;
    json usage = {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}};
    return Event(out, "message_start",
                 {{"type", "message_start"},
                  {"message", Message(id_, model_, json::array(), nullptr, nullptr, usage)}}) &&
           Event(out, "ping", {{"type", "ping"}}) &&
           Event(out, "content_block_start",
                 {{"type", "content_block_start"},
                  {"index", 0},
                  {"content_block", {{"type", "text"}, {"text", ""}}}});
  }
  bool Text(const Write& out, const std::string& text) {
    if (text.empty()) return true;
    return Event(
        out, "content_block_delta",
        {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  bool OnChunk(const json& chunk, const Write& out) override {
    if (chunk.contains("error")) {
      failed_ = true;
      const json& e = chunk["error"];
      return Event(out, "error", ErrorJson(500, e.value("message", std::string("the engine failed"))));
    }
    if (!Start(out)) return false;
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      output_tokens_ = chunk["usage"].value("completion_tokens", int64_t{0});
      prompt_tokens_ = chunk["usage"].value("prompt_tokens", prompt_tokens_);
    }
    for (const json& c : chunk["choices"]) {
      if (c["delta"].contains("content")) pending_ += c["delta"]["content"].get<std::string>();
      if (c["finish_reason"].is_string()) finish_ = c["finish_reason"].get<std::string>();
    }
    // Send all but the tail that a stop sequence could still end.
    if (pending_.size() > hold_) {
      size_t n = pending_.size() - hold_;
      while (n > 0 && (static_cast<unsigned char>(pending_[n]) & 0xC0) == 0x80) --n;  // whole characters
      if (!Text(out, pending_.substr(0, n))) return false;
      pending_.erase(0, n);
    }
    return true;
  }
  bool OnDone(const Write& out) override {
    if (failed_) return true;  // the error event ended it
    if (!Start(out)) return false;
    std::optional<std::string> stop = finish_ == "stop" ? EndingStop(pending_, stops_) : std::nullopt;
    if (stop) pending_.erase(pending_.size() - stop->size());
    return Text(out, pending_) &&
           Event(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) &&
           Event(out, "message_delta",
                 {{"type", "message_delta"},
                  {"delta",
                   {{"stop_reason", StopReason(finish_, stop)},
                    {"stop_sequence", stop ? json(*stop) : json()}}},
                  {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", output_tokens_}}}}) &&
           Event(out, "message_stop", {{"type", "message_stop"}});
  }

  const std::string id_ = NewResponseId("msg_");
  std::string model_;
  int64_t prompt_tokens_ = 0;
  int64_t output_tokens_ = 0;
  std::vector<std::string> stops_;
  size_t hold_ = 0;       // the longest stop sequence
  std::string pending_;   // text not sent yet
  std::string finish_;    // the chat finish_reason
  bool started_ = false;  // message_start was sent
  bool failed_ = false;   // an error event was sent
};

}  // namespace

Reply AnthropicMessages(CompletionService& chat, std::string_view body) {
  Parsed<json> parsed = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Error(*e);
  auto translated = ToChat(std::get<json>(parsed));
  if (auto* e = std::get_if<ApiError>(&translated)) return Error(*e);
  Translated& t = std::get<Translated>(translated);
  Reply r = chat.ChatCompletions(Dump(t.chat));
  if (r.stream) {
    const GenerationSpec& spec = r.stream->spec();
    int64_t prompt_tokens = 0;
    for (int32_t n : spec.prompt_tokens) prompt_tokens += n;
    r.translate = std::make_shared<MessageStream>(spec.model, prompt_tokens, t.stops);
    return r;
  }
  json j = json::parse(r.body, nullptr, false);
  if (r.status != 200) {
    const std::string message =
        j.is_object() && j.contains("error") ? j["error"].value("message", r.body) : r.body;
    r.body = Dump(ErrorJson(r.status, message));
    return r;
  }
  const json& choice = j["choices"][0];
  std::string text = choice["message"]["content"].get<std::string>();
  const std::string finish = choice["finish_reason"].get<std::string>();
  std::optional<std::string> stop = finish == "stop" ? EndingStop(text, t.stops) : std::nullopt;
  if (stop) text.erase(text.size() - stop->size());
  json content = json::array({{{"type", "text"}, {"text", text}}});
  json usage = {{"input_tokens", j["usage"]["prompt_tokens"]},
                {"output_tokens", j["usage"]["completion_tokens"]}};
  r.body = Dump(Message(NewResponseId("msg_"), j["model"].get<std::string>(), std::move(content),
                        StopReason(finish, stop), stop ? json(*stop) : json(), std::move(usage)));
  return r;
}

}  // namespace ferry::server
