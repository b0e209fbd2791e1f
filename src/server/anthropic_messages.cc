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

// A block's keys other than `allowed` (and cache_control: prefix caching is automatic) are refused.
std::optional<ApiError> OnlyKeys(const json& b, std::initializer_list<const char*> allowed,
                                 const std::string& field) {
  for (const auto& [k, v] : b.items())
    if (k != "type" && k != "cache_control" &&
        std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }))
      return BadRequest(
          fmt::format("'{}' {} blocks: '{}' is not supported", field, b["type"].get<std::string>(), k),
          field);
  return std::nullopt;
}

std::variant<json, ApiError> TextBlock(const json& b, const std::string& field) {
  if (auto e = OnlyKeys(b, {"text"}, field)) return *e;
  if (!b.contains("text") || !b["text"].is_string())
    return InvalidType(fmt::format("'{}' text blocks need a string 'text'", field), field);
  return json{{"type", "text"}, {"text", b["text"]}};
}

bool IsBlock(const json& b) {
  return b.is_object() && b.contains("type") && b["type"].is_string();
}

// Text content: a string or a list of text blocks; other block types are refused.
std::variant<json, ApiError> Content(const json& c, const std::string& field) {
  if (c.is_string()) return json(c);
  if (!c.is_array())
    return InvalidType(fmt::format("'{}' must be a string or a list of blocks", field), field);
  json parts = json::array();
  for (const json& b : c) {
    if (!IsBlock(b))
      return InvalidType(fmt::format("'{}' blocks must be objects with a 'type'", field), field);
    if (b["type"] != "text")
      return BadRequest(fmt::format("'{}' block type '{}' is not supported (text only)", field,
                                    b["type"].get<std::string>()),
                        field);
    auto part = TextBlock(b, field);
    if (auto* e = std::get_if<ApiError>(&part)) return *e;
    parts.push_back(std::get<json>(std::move(part)));
  }
  return parts;
}

// A tool_result block's content (a string or text blocks, joined by "\n") as the chat tool
// message's text; is_error marks it as a failure the model should see.
std::variant<json, ApiError> ToolResultMessage(const json& b) {
  if (auto e = OnlyKeys(b, {"tool_use_id", "content", "is_error"}, "messages")) return *e;
  if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
    return InvalidType("'messages' tool_result blocks need a string 'tool_use_id'", "messages");
  std::string text;
  if (b.contains("content")) {
    auto c = Content(b["content"], "messages");
    if (auto* e = std::get_if<ApiError>(&c)) return *e;
    const json& parts = std::get<json>(c);
    if (parts.is_string()) {
      text = parts.get<std::string>();
    } else {
      for (const json& p : parts) {
        if (!text.empty()) text += '\n';
        text += p["text"].get<std::string>();
      }
    }
  }
  if (b.contains("is_error")) {
    if (!b["is_error"].is_boolean())
      return InvalidType("'messages' tool_result 'is_error' must be a boolean", "messages");
    if (b["is_error"].get<bool>()) text = fmt::format("Error: {}", text);
  }
  return json{{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", text}};
}

// An assistant tool_use block as a chat tool call.
std::variant<json, ApiError> ToolUseCall(const json& b) {
  if (auto e = OnlyKeys(b, {"id", "name", "input"}, "messages")) return *e;
  if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
    return InvalidType("'messages' tool_use blocks need a string 'id' and 'name'", "messages");
  if (!b.contains("input") || !b["input"].is_object())
    return InvalidType("'messages' tool_use blocks need an object 'input'", "messages");
  return json{{"id", b["id"]},
              {"type", "function"},
              {"function", {{"name", b["name"]}, {"arguments", b["input"].dump()}}}};
}

// One Anthropic message as chat messages: a user's tool_result blocks become tool messages
// (before its text), an assistant's tool_use blocks its tool_calls.
std::optional<ApiError> AppendMessage(const json& m, json& out) {
  const bool user = m["role"] == "user";
  const json& c = m["content"];
  if (c.is_string()) {
    out.push_back({{"role", m["role"]}, {"content", c}});
    return std::nullopt;
  }
  if (!c.is_array())
    return InvalidType("'messages' content must be a string or a list of blocks", "messages");
  json text = json::array(), calls = json::array();
  for (const json& b : c) {
    if (!IsBlock(b)) return InvalidType("'messages' blocks must be objects with a 'type'", "messages");
    const std::string type = b["type"].get<std::string>();
    std::variant<json, ApiError> item;
    if (type == "text") {
      item = TextBlock(b, "messages");
    } else if (type == "tool_result" && user) {
      item = ToolResultMessage(b);
    } else if (type == "tool_use" && !user) {
      item = ToolUseCall(b);
    } else {
      return BadRequest(fmt::format("'messages' block type '{}' is not supported in {} messages (text, {})",
                                    type, user ? "user" : "assistant", user ? "tool_result" : "tool_use"),
                        "messages");
    }
    if (auto* e = std::get_if<ApiError>(&item)) return *e;
    json& v = std::get<json>(item);
    if (type == "text")
      text.push_back(std::move(v));
    else if (type == "tool_use")
      calls.push_back(std::move(v));
    else
      out.push_back(std::move(v));
  }
  if (user) {
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", std::move(text)}});
    return std::nullopt;
  }
  json a = {{"role", "assistant"},
            {"content", !text.empty()   ? std::move(text)
                        : calls.empty() ? json("")
                                        : json()}};
  if (!calls.empty()) a["tool_calls"] = std::move(calls);
  out.push_back(std::move(a));
  return std::nullopt;
}

// tools [{name, description, input_schema}] and tool_choice {type: auto | any | tool | none,
// name, disable_parallel_tool_use} as the chat fields.
std::optional<ApiError> AppendTools(const json& j, json& chat) {
  if (j.contains("tools")) {
    const json& tools = j["tools"];
    if (!tools.is_array()) return InvalidType("'tools' must be a list", "tools");
    chat["tools"] = json::array();
    for (const json& t : tools) {
      if (!t.is_object()) return InvalidType("'tools' entries must be objects", "tools");
      for (const auto& [k, v] : t.items())
        if (k != "name" && k != "description" && k != "input_schema" && k != "type" && k != "cache_control")
          return Refused("tools." + k);
      if (t.contains("type") && t["type"] != "custom")
        return BadRequest(
            "'tools': only custom tools (name, description, input_schema) are supported; "
            "server tools are not",
            "tools");
      if (!t.contains("name") || !t["name"].is_string())
        return InvalidType("'tools' entries need a string 'name'", "tools");
      if (!t.contains("input_schema") || !t["input_schema"].is_object())
        return InvalidType("'tools' entries need an object 'input_schema'", "tools");
      json f = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
      if (t.contains("description")) f["description"] = t["description"];
      chat["tools"].push_back({{"type", "function"}, {"function", std::move(f)}});
    }
  }
  if (!j.contains("tool_choice")) return std::nullopt;
  const json& tc = j["tool_choice"];
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    return InvalidType("'tool_choice' must be an object with a 'type'", "tool_choice");
  for (const auto& [k, v] : tc.items())
    if (k != "type" && k != "name" && k != "disable_parallel_tool_use") return Refused("tool_choice." + k);
  const std::string type = tc["type"].get<std::string>();
  if (type == "auto") {
    chat["tool_choice"] = "auto";
  } else if (type == "any") {
    chat["tool_choice"] = "required";
  } else if (type == "none") {
    chat["tool_choice"] = "none";
  } else if (type == "tool") {
    if (!tc.contains("name") || !tc["name"].is_string())
      return InvalidType("'tool_choice' of type 'tool' needs a string 'name'", "tool_choice");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  } else {
    return BadRequest(fmt::format("'tool_choice' type '{}' is not one of auto, any, tool, none", type),
                      "tool_choice");
  }
  if (tc.contains("name") && type != "tool") return Refused("tool_choice.name", "is only for type 'tool'");
  if (tc.contains("disable_parallel_tool_use")) {
    if (!tc["disable_parallel_tool_use"].is_boolean())
      return InvalidType("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice");
    chat["parallel_tool_calls"] = !tc["disable_parallel_tool_use"].get<bool>();
  }
  return std::nullopt;
}

struct Translated {
  json chat;                       // the chat completions request
  std::vector<std::string> stops;  // stop_sequences
};

std::variant<Translated, ApiError> ToChat(const json& j) {
  Translated t;
  json& c = t.chat;
  for (const auto& [k, v] : j.items()) {
    static const char* kKnown[] = {"model",          "max_tokens",  "messages", "system",
                                   "stop_sequences", "temperature", "top_p",    "top_k",
                                   "stream",         "metadata",    "tools",    "tool_choice"};
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
    if (auto e = AppendMessage(m, c["messages"])) return *e;
  }
  if (auto e = AppendTools(j, c)) return *e;
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
  if (finish == "tool_calls") return "tool_use";
  return finish == "length" ? "max_tokens" : "end_turn";
}

json ToolUseBlock(const json& id, const json& name, json input) {
  return {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", std::move(input)}};
}

// A call's arguments as tool_use input: the object they spell ({} when max_tokens cut them).
json ToolInput(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
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

// Chat chunks -> message_start, ping, then content blocks in order: a text block
// (content_block_start, text_delta ..., content_block_stop) and per tool call a tool_use block
// whose input streams as input_json_delta; then message_delta (stop_reason, usage) and
// message_stop. Text that could be the start of a stop sequence is held back until the end,
// where a matched one is cut.
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
           Event(out, "ping", {{"type", "ping"}});
  }
  bool CloseBlock(const Write& out) {
    if (!open_) return true;
    open_ = false;
    return Event(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  bool OpenBlock(const Write& out, json block, bool text) {
    if (!CloseBlock(out)) return false;
    ++index_;
    open_ = true;
    text_open_ = text;
    return Event(out, "content_block_start",
                 {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
  }
  bool Delta(const Write& out, json delta) {
    return Event(out, "content_block_delta",
                 {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }
  bool Text(const Write& out, const std::string& text) {
    if (text.empty()) return true;
    if (!(open_ && text_open_) && !OpenBlock(out, {{"type", "text"}, {"text", ""}}, true)) return false;
    return Delta(out, {{"type", "text_delta"}, {"text", text}});
  }
  // A tool call's delta: its first opens a tool_use block (the text so far is out: no stop
  // sequence ended it), later ones append to its input.
  bool Call(const Write& out, const json& call) {
    if (call.contains("id")) {
      if (!Text(out, pending_)) return false;
      pending_.clear();
      if (!OpenBlock(out, ToolUseBlock(call["id"], call["function"]["name"], json::object()), false))
        return false;
    }
    const std::string args = call["function"].value("arguments", std::string());
    if (args.empty() || !open_ || text_open_) return true;
    return Delta(out, {{"type", "input_json_delta"}, {"partial_json", args}});
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
      if (c["delta"].contains("content") && c["delta"]["content"].is_string())
        pending_ += c["delta"]["content"].get<std::string>();
      if (c["delta"].contains("tool_calls"))
        for (const json& call : c["delta"]["tool_calls"])
          if (!Call(out, call)) return false;
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
    if (!Text(out, pending_)) return false;
    if (index_ < 0 && !OpenBlock(out, {{"type", "text"}, {"text", ""}}, true))
      return false;  // an empty answer
    return CloseBlock(out) &&
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
  size_t hold_ = 0;         // the longest stop sequence
  std::string pending_;     // text not sent yet
  std::string finish_;      // the chat finish_reason
  bool started_ = false;    // message_start was sent
  bool failed_ = false;     // an error event was sent
  int index_ = -1;          // the content block open or last sent
  bool open_ = false;       // block index_ is open
  bool text_open_ = false;  // and is a text block
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
  const json& message = choice["message"];
  std::string text = message["content"].is_string() ? message["content"].get<std::string>() : std::string();
  const std::string finish = choice["finish_reason"].get<std::string>();
  std::optional<std::string> stop = finish == "stop" ? EndingStop(text, t.stops) : std::nullopt;
  if (stop) text.erase(text.size() - stop->size());
  json content = json::array();
  if (!text.empty() || !message.contains("tool_calls")) content.push_back({{"type", "text"}, {"text", text}});
  if (message.contains("tool_calls"))
    for (const json& call : message["tool_calls"])
      content.push_back(ToolUseBlock(call["id"], call["function"]["name"],
                                     ToolInput(call["function"]["arguments"].get<std::string>())));
  json usage = {{"input_tokens", j["usage"]["prompt_tokens"]},
                {"output_tokens", j["usage"]["completion_tokens"]}};
  r.body = Dump(Message(NewResponseId("msg_"), j["model"].get<std::string>(), std::move(content),
                        StopReason(finish, stop), stop ? json(*stop) : json(), std::move(usage)));
  return r;
}

}  // namespace ferry::server
