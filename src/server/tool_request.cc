#include "server/tool_request.h"

#include <fmt/format.h>

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

ApiError WrongType(const std::string& param, const char* expected) {
  return ApiError{400, fmt::format("Invalid type for '{}': expected {}.", param, expected), param,
                  "invalid_type"};
}

// OpenAI's rule for function names: a-z, A-Z, 0-9, underscores and dashes, at most 64.
bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::optional<ApiError> ReadTool(const json& t, size_t i, tool_calls::ToolDef& out) {
  const std::string p = fmt::format("tools[{}]", i);
  if (!t.is_object()) return WrongType(p, "an object");
  for (const auto& [k, v] : t.items())
    if (k != "type" && k != "function")
      return BadRequest(fmt::format("'{}.{}' is not supported", p, k), p + "." + k);
  if (t.value("type", json()) != "function")
    return BadRequest(fmt::format("'{}.type' must be \"function\" (the only tool type supported)", p),
                      p + ".type");
  if (!t.contains("function") || !t["function"].is_object()) return WrongType(p + ".function", "an object");
  const json& f = t["function"];
  for (const auto& [k, v] : f.items())
    if (k != "name" && k != "description" && k != "parameters" && k != "strict")
      return BadRequest(fmt::format("'{}.function.{}' is not supported", p, k), p + ".function." + k);
  if (!f.contains("name") || !f["name"].is_string()) return WrongType(p + ".function.name", "a string");
  out.name = f["name"].get<std::string>();
  if (!ValidName(out.name))
    return BadRequest(
        fmt::format("'{}.function.name' is '{}': names are 1-64 of a-z, A-Z, 0-9, _ and -", p, out.name),
        p + ".function.name");
  if (f.contains("description") && !f["description"].is_null()) {
    if (!f["description"].is_string()) return WrongType(p + ".function.description", "a string");
    out.description = f["description"].get<std::string>();
  }
  if (f.contains("parameters") && !f["parameters"].is_null()) {
    if (!f["parameters"].is_object()) return WrongType(p + ".function.parameters", "a JSON Schema object");
    out.parameters = f["parameters"];
  }
  if (f.contains("strict") && !f["strict"].is_boolean() && !f["strict"].is_null())
    return WrongType(p + ".function.strict", "a boolean");
  return std::nullopt;
}

std::optional<ApiError> ReadChoice(const json& v, ToolRequest& out) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "none")
      out.choice = ToolRequest::Choice::kNone;
    else if (s == "auto")
      out.choice = ToolRequest::Choice::kAuto;
    else if (s == "required")
      out.choice = ToolRequest::Choice::kRequired;
    else
      return BadRequest(fmt::format("'tool_choice' is '{}'; expected none, auto, required or a function", s),
                        "tool_choice");
    return std::nullopt;
  }
  if (!v.is_object() || v.value("type", json()) != "function" || !v.contains("function") ||
      !v["function"].is_object() || !v["function"].contains("name") || !v["function"]["name"].is_string())
    return BadRequest(
        "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": "
        "...}}",
        "tool_choice");
  out.choice = ToolRequest::Choice::kNamed;
  out.named = v["function"]["name"].get<std::string>();
  return std::nullopt;
}

}  // namespace

std::vector<tool_calls::ToolDef> ToolRequest::Allowed() const {
  if (choice != Choice::kNamed) return tools;
  std::vector<tool_calls::ToolDef> one;
  for (const tool_calls::ToolDef& t : tools)
    if (t.name == named) one.push_back(t);
  return one;
}

std::optional<ApiError> ReadToolRequest(const json& obj, ToolRequest& out, json& template_kwargs) {
  auto present = [&](const char* k) { return obj.contains(k) && !obj[k].is_null(); };
  for (const char* k : {"functions", "function_call"})
    if (present(k))
      return BadRequest(fmt::format("'{}' (the deprecated function calling) is not supported; use tools", k),
                        k);
  if (present("tools")) {
    const json& t = obj["tools"];
    if (!t.is_array()) return WrongType("tools", "an array of tools");
    for (size_t i = 0; i < t.size(); ++i) {
      tool_calls::ToolDef d;
      if (auto e = ReadTool(t[i], i, d)) return e;
      for (const tool_calls::ToolDef& other : out.tools)
        if (other.name == d.name)
          return BadRequest(fmt::format("'tools' names the function '{}' twice", d.name), "tools");
      out.tools.push_back(std::move(d));
    }
    if (!out.tools.empty()) out.tools_json = t;
  }
  if (present("tool_choice")) {
    if (auto e = ReadChoice(obj["tool_choice"], out)) return e;
  } else if (out.tools.empty()) {
    out.choice = ToolRequest::Choice::kNone;
  }
  if (out.forced() && out.tools.empty())
    return BadRequest("'tool_choice' required or a named function needs 'tools'", "tool_choice");
  if (out.choice == ToolRequest::Choice::kNamed && out.Allowed().empty())
    return BadRequest(
        fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", out.named),
        "tool_choice");
  if (present("parallel_tool_calls")) {
    if (!obj["parallel_tool_calls"].is_boolean()) return WrongType("parallel_tool_calls", "a boolean");
    out.parallel = obj["parallel_tool_calls"].get<bool>();
  }
  template_kwargs = json::object();
  if (present("chat_template_kwargs")) {
    if (!obj["chat_template_kwargs"].is_object()) return WrongType("chat_template_kwargs", "an object");
    for (const auto& [k, v] : obj["chat_template_kwargs"].items()) {
      // The fixed inputs stay the request's own.
      if (k == "messages" || k == "tools" || k == "add_generation_prompt" || k == "bos_token" ||
          k == "eos_token")
        return BadRequest(fmt::format("'chat_template_kwargs.{}' is set by the request itself", k),
                          "chat_template_kwargs." + k);
      template_kwargs[k] = v;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadToolMessage(json& m, size_t index) {
  const std::string p = fmt::format("messages[{}]", index);
  const std::string role = m["role"].get<std::string>();
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (role != "assistant")
      return BadRequest(fmt::format("'{}.tool_calls' is only allowed on assistant messages", p),
                        p + ".tool_calls");
    json& calls = m["tool_calls"];
    if (!calls.is_array()) return WrongType(p + ".tool_calls", "an array");
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string cp = fmt::format("{}.tool_calls[{}]", p, i);
      json& c = calls[i];
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].contains("name") || !c["function"]["name"].is_string())
        return BadRequest(
            fmt::format("'{}' must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", "
                        "\"arguments\"}}}}",
                        cp),
            cp);
      json& args = c["function"]["arguments"];
      if (args.is_string()) {
        json parsed = json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded())
          return BadRequest(fmt::format("'{}.function.arguments' is not valid JSON", cp),
                            cp + ".function.arguments");
        args = std::move(parsed);
      } else if (args.is_null()) {
        args = json::object();
      }
    }
  }
  if (role == "tool" && m.contains("tool_call_id") && !m["tool_call_id"].is_string() &&
      !m["tool_call_id"].is_null())
    return WrongType(p + ".tool_call_id", "a string");
  return std::nullopt;
}

}  // namespace ferry::server
