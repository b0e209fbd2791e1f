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

// A message item as a chat message.
std::optional<ApiError> AppendMessageItem(const json& item, json& out) {
  if (!item.contains("role") || !item.contains("content"))
    return InvalidType("'input' message items need 'role' and 'content'", "input");
  const json& role = item["role"];
  if (role != "user" && role != "assistant" && role != "system" && role != "developer")
    return BadRequest("'input' roles must be user, assistant, system or developer", "input");
  for (const auto& [k, v] : item.items())
    if (k != "role" && k != "content" && k != "type")
      return BadRequest(fmt::format("'input' items: '{}' is not supported", k), "input");
  auto content = Content(item["content"]);
  if (auto* e = std::get_if<ApiError>(&content)) return *e;
  out.push_back({{"role", role}, {"content", std::get<json>(content)}});
  return std::nullopt;
}

bool HasString(const json& item, const char* key) {
  return item.contains(key) && item[key].is_string();
}

// An input item: a message, a function_call the model made (joined to the assistant turn
// before it, as chat tool_calls) or a function_call_output (a tool message).
std::optional<ApiError> AppendItem(const json& item, json& out) {
  if (!item.is_object()) return InvalidType("'input' items must be objects", "input");
  const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>()
                                                                             : std::string("message");
  if (type == "message") return AppendMessageItem(item, out);
  if (type == "function_call") {
    for (const auto& [k, v] : item.items())
      if (k != "type" && k != "call_id" && k != "name" && k != "arguments" && k != "id" && k != "status")
        return BadRequest(fmt::format("'input' function_call items: '{}' is not supported", k), "input");
    if (!HasString(item, "call_id") || !HasString(item, "name") || !HasString(item, "arguments"))
      return InvalidType("'input' function_call items need string 'call_id', 'name' and 'arguments'",
                         "input");
    json call = {{"id", item["call_id"]},
                 {"type", "function"},
                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
    if (out.empty() || out.back()["role"] != "assistant")
      out.push_back({{"role", "assistant"}, {"content", nullptr}});
    out.back()["tool_calls"].push_back(std::move(call));
    return std::nullopt;
  }
  if (type == "function_call_output") {
    for (const auto& [k, v] : item.items())
      if (k != "type" && k != "call_id" && k != "output" && k != "id" && k != "status")
        return BadRequest(fmt::format("'input' function_call_output items: '{}' is not supported", k),
                          "input");
    if (!HasString(item, "call_id") || !HasString(item, "output"))
      return InvalidType("'input' function_call_output items need string 'call_id' and 'output'", "input");
    out.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", item["output"]}});
    return std::nullopt;
  }
  return BadRequest(fmt::format("'input' items of type '{}' are not supported (message, function_call, "
                                "function_call_output)",
                                type),
                    "input");
}

// tools [{type: function, name, description, parameters, strict}] and tool_choice (none,
// auto, required, {type: function, name}) as the chat fields.
std::optional<ApiError> AppendTools(const json& j, json& chat) {
  if (j.contains("tools")) {
    if (!j["tools"].is_array()) return InvalidType("'tools' must be a list", "tools");
    chat["tools"] = json::array();
    for (const json& t : j["tools"]) {
      if (!t.is_object() || t.value("type", "") != "function")
        return BadRequest("'tools': only function tools are supported", "tools");
      json f;
      for (const auto& [k, v] : t.items()) {
        if (k == "type") continue;
        if (k != "name" && k != "description" && k != "parameters" && k != "strict")
          return Refused("tools." + k);
        f[k] = v;
      }
      chat["tools"].push_back({{"type", "function"}, {"function", std::move(f)}});
    }
  }
  if (j.contains("tool_choice")) {
    const json& tc = j["tool_choice"];
    if (tc.is_object()) {
      for (const auto& [k, v] : tc.items())
        if (k != "type" && k != "name") return Refused("tool_choice." + k);
      if (tc.value("type", "") != "function" || !HasString(tc, "name"))
        return BadRequest("'tool_choice' objects must be {\"type\": \"function\", \"name\": ...}",
                          "tool_choice");
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    } else {
      chat["tool_choice"] = tc;  // none | auto | required: the chat path checks the value
    }
  }
  return std::nullopt;
}

std::variant<json, ApiError> ToChat(const json& j) {
  static const char* kKnown[] = {"model",
                                 "input",
                                 "instructions",
                                 "max_output_tokens",
                                 "temperature",
                                 "top_p",
                                 "stream",
                                 "store",
                                 "user",
                                 "metadata",
                                 "tools",
                                 "tool_choice",
                                 "parallel_tool_calls"};
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
    for (const json& item : in)
      if (auto e = AppendItem(item, c["messages"])) return *e;
  } else {
    return in.is_array() ? BadRequest("'input' must not be empty", "input")
                         : InvalidType("'input' must be a string or a list of message items", "input");
  }
  // The chat path checks each value's type and range (and names max_tokens for max_output_tokens).
  for (const char* k : {"model", "temperature", "top_p", "stream", "user", "parallel_tool_calls"})
    if (j.contains(k)) c[k] = j[k];
  if (auto e = AppendTools(j, c)) return *e;
  if (j.contains("max_output_tokens") && !j["max_output_tokens"].is_null())
    c["max_tokens"] = j["max_output_tokens"];
  if (c.value("stream", false)) c["stream_options"] = {{"include_usage", true}};
  return c;
}

struct Settings {
  json instructions, max_output_tokens, temperature, top_p, metadata, tools, tool_choice, parallel_tool_calls;
};

Settings SettingsOf(const json& j) {
  auto get = [&](const char* k, json def) { return j.contains(k) ? j[k] : def; };
  const bool tools = j.contains("tools") && !j["tools"].empty();
  return {get("instructions", nullptr),
          get("max_output_tokens", nullptr),
          get("temperature", 1.0),
          get("top_p", 1.0),
          get("metadata", json::object()),
          get("tools", json::array()),
          get("tool_choice", tools ? "auto" : "none"),
          get("parallel_tool_calls", true)};
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

// A call the model made, as an output item (its id names the item, call_id the call).
json FunctionCallItem(const std::string& id, const json& call_id, const json& name,
                      const std::string& arguments, const char* status) {
  return {{"type", "function_call"}, {"id", id},        {"call_id", call_id}, {"name", name},
          {"arguments", arguments},  {"status", status}};
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
          {"parallel_tool_calls", s.parallel_tool_calls},
          {"temperature", s.temperature},
          {"tool_choice", s.tool_choice},
          {"tools", s.tools},
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

// Chat chunks -> response.created, response.in_progress, then the output items in order: a
// message (response.output_item.added, response.content_part.added, response.output_text.delta
// ..., response.output_text.done, response.content_part.done, response.output_item.done) and
// per tool call a function_call item (response.output_item.added,
// response.function_call_arguments.delta ..., response.function_call_arguments.done,
// response.output_item.done); then response.completed (or response.incomplete when
// max_output_tokens cut it).
class ResponseStream final : public SseTranslator {
 public:
  ResponseStream(std::string model, Settings s) : model_(std::move(model)), settings_(std::move(s)) {}

 private:
  struct Item {
    std::string id;
    bool call = false;
    std::string text;  // the message's text, or the call's arguments
    json call_id, name;
  };
  bool Event(const Write& out, const char* type, json data) {
    json e = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : data.items()) e[k] = std::move(v);
    return out(fmt::format("event: {}\ndata: {}\n\n", type, Dump(e)));
  }
  size_t Index() const { return items_.size() - 1; }
  json Part() const {
    return {{"item_id", items_.back().id}, {"output_index", Index()}, {"content_index", 0}};
  }
  json ItemJson(const Item& it, const char* status) const {
    return it.call ? FunctionCallItem(it.id, it.call_id, it.name, it.text, status)
                   : MessageItem(it.id, status,
                                 std::string_view(status) == "completed" ? json::array({OutputText(it.text)})
                                                                         : json::array());
  }
  bool Start(const Write& out) {
    if (started_) return true;
    started_ = true;
    const json r = Response(id_, created_, model_, settings_, "", json::array(), nullptr);
    return Event(out, "response.created", {{"response", r}}) &&
           Event(out, "response.in_progress", {{"response", r}});
  }
  bool Open(const Write& out, Item it) {
    if (!CloseItem(out)) return false;
    items_.push_back(std::move(it));
    open_ = true;
    if (!Event(out, "response.output_item.added",
               {{"output_index", Index()}, {"item", ItemJson(items_.back(), "in_progress")}}))
      return false;
    if (items_.back().call) return true;
    json part = Part();
    part["part"] = OutputText("");
    return Event(out, "response.content_part.added", part);
  }
  bool CloseItem(const Write& out) {
    if (!open_) return true;
    open_ = false;
    const Item& it = items_.back();
    if (it.call) {
      return Event(out, "response.function_call_arguments.done",
                   {{"item_id", it.id}, {"output_index", Index()}, {"arguments", it.text}}) &&
             Event(out, "response.output_item.done",
                   {{"output_index", Index()}, {"item", ItemJson(it, "completed")}});
    }
    json text_done = Part();
    text_done["text"] = it.text;
    text_done["logprobs"] = json::array();
    json part_done = Part();
    part_done["part"] = OutputText(it.text);
    return Event(out, "response.output_text.done", text_done) &&
           Event(out, "response.content_part.done", part_done) &&
           Event(out, "response.output_item.done",
                 {{"output_index", Index()}, {"item", ItemJson(it, "completed")}});
  }
  bool Text(const Write& out, const std::string& d) {
    if (d.empty()) return true;
    if (!(open_ && !items_.back().call) && !Open(out, {NewResponseId("msg_"), false, "", nullptr, nullptr}))
      return false;
    items_.back().text += d;
    json delta = Part();
    delta["delta"] = d;
    delta["logprobs"] = json::array();
    return Event(out, "response.output_text.delta", delta);
  }
  bool Call(const Write& out, const json& call) {
    if (call.contains("id") &&
        !Open(out, {NewResponseId("fc_"), true, "", call["id"], call["function"]["name"]}))
      return false;
    const std::string d = call["function"].value("arguments", std::string());
    if (d.empty() || !open_ || !items_.back().call) return true;
    items_.back().text += d;
    return Event(out, "response.function_call_arguments.delta",
                 {{"item_id", items_.back().id}, {"output_index", Index()}, {"delta", d}});
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
      if (c["delta"].contains("content") && c["delta"]["content"].is_string() &&
          !Text(out, c["delta"]["content"].get<std::string>()))
        return false;
      if (c["delta"].contains("tool_calls"))
        for (const json& call : c["delta"]["tool_calls"])
          if (!Call(out, call)) return false;
    }
    return true;
  }
  bool OnDone(const Write& out) override {
    if (failed_) return true;  // the error event ended it
    if (!Start(out)) return false;
    if (items_.empty() && !Open(out, {NewResponseId("msg_"), false, "", nullptr, nullptr})) return false;
    if (!CloseItem(out)) return false;
    json output = json::array();
    for (const Item& it : items_) output.push_back(ItemJson(it, "completed"));
    const json r = Response(id_, created_, model_, settings_, finish_.empty() ? "stop" : finish_,
                            std::move(output), Usage(usage_));
    return Event(out, finish_ == "length" ? "response.incomplete" : "response.completed", {{"response", r}});
  }

  const std::string id_ = NewResponseId("resp_");
  const int64_t created_ = static_cast<int64_t>(std::time(nullptr));
  std::string model_;
  Settings settings_;
  int64_t seq_ = 0;          // sequence_number of the next event
  std::vector<Item> items_;  // the output items so far, the last one open while open_
  bool open_ = false;
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
  const json& message = choice["message"];
  const std::string text = message["content"].is_string() ? message["content"].get<std::string>() : "";
  json output = json::array();
  if (!text.empty() || !message.contains("tool_calls"))
    output.push_back(MessageItem(NewResponseId("msg_"), "completed", json::array({OutputText(text)})));
  if (message.contains("tool_calls"))
    for (const json& call : message["tool_calls"])
      output.push_back(FunctionCallItem(NewResponseId("fc_"), call["id"], call["function"]["name"],
                                        call["function"]["arguments"].get<std::string>(), "completed"));
  r.body = Dump(Response(NewResponseId("resp_"), c["created"].get<int64_t>(), c["model"].get<std::string>(),
                         SettingsOf(j), finish, std::move(output), Usage(c["usage"])));
  return r;
}

}  // namespace ferry::server
