#include "server/structured_output_request.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace ferry::server {

namespace {

using json = nlohmann::ordered_json;
using Kind = constraint::ConstraintSpec::Kind;

ApiError WrongType(const std::string& param, const char* expected) {
  return ApiError{422, fmt::format("Invalid type for '{}': expected {}.", param, expected), param};
}

// A schema given as an object, or as JSON text (vLLM accepts both for guided_json).
std::optional<ApiError> SchemaText(const json& v, const std::string& param, std::string& out) {
  if (v.is_object() || v.is_boolean()) {
    out = v.dump();
    return std::nullopt;
  }
  if (v.is_string()) {
    json parsed = json::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) return BadRequest(fmt::format("'{}' is not valid JSON", param), param);
    out = parsed.dump();
    return std::nullopt;
  }
  return WrongType(param, "a JSON schema (an object)");
}

std::optional<ApiError> Choices(const json& v, const std::string& param, std::vector<std::string>& out) {
  if (!v.is_array() || v.empty()) return WrongType(param, "a non-empty array of strings");
  for (const json& c : v) {
    if (!c.is_string()) return WrongType(param, "a non-empty array of strings");
    if (c.get<std::string>().empty())
      return BadRequest(fmt::format("'{}' has an empty choice", param), param);
    out.push_back(c.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> Text(const json& v, const std::string& param, std::string& out) {
  if (!v.is_string()) return WrongType(param, "a string");
  out = v.get<std::string>();
  if (out.empty()) return BadRequest(fmt::format("'{}' is empty", param), param);
  return std::nullopt;
}

std::optional<ApiError> ResponseFormat(const json& v, std::optional<constraint::ConstraintSpec>& out) {
  if (!v.is_object()) return WrongType("response_format", "an object");
  if (!v.contains("type") || !v["type"].is_string())
    return BadRequest("'response_format.type' is required: text, json_object or json_schema",
                      "response_format.type");
  const std::string type = v["type"].get<std::string>();
  for (const auto& [k, x] : v.items())
    if (k != "type" && !(type == "json_schema" && k == "json_schema"))
      return BadRequest(fmt::format("'response_format.{}' is not supported with type '{}'", k, type),
                        "response_format." + k);
  if (type == "text") return std::nullopt;
  constraint::ConstraintSpec spec;
  if (type == "json_object") {
    spec.kind = Kind::kJsonObject;
  } else if (type == "json_schema") {
    const json* js = v.contains("json_schema") ? &v["json_schema"] : nullptr;
    if (!js || !js->is_object())
      return BadRequest("'response_format.json_schema' is required (an object with name and schema)",
                        "response_format.json_schema");
    for (const auto& [k, x] : js->items())
      if (k != "name" && k != "schema" && k != "strict" && k != "description")
        return BadRequest(fmt::format("'response_format.json_schema.{}' is not supported", k),
                          "response_format.json_schema." + k);
    if (!js->contains("name") || !(*js)["name"].is_string() || (*js)["name"].get<std::string>().empty())
      return BadRequest("'response_format.json_schema.name' is required (a string)",
                        "response_format.json_schema.name");
    if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null())
      return WrongType("response_format.json_schema.strict", "a boolean");
    spec.kind = Kind::kJsonSchema;
    // No schema: any JSON value, as OpenAI does.
    if (!js->contains("schema")) {
      spec.kind = Kind::kJsonValue;
    } else if (auto e = SchemaText((*js)["schema"], "response_format.json_schema.schema", spec.text)) {
      return e;
    }
  } else {
    return BadRequest(
        fmt::format("'response_format.type' is '{}'; expected text, json_object or json_schema", type),
        "response_format.type");
  }
  out = std::move(spec);
  return std::nullopt;
}

// One constraint value of the given kind (a schema, a regex, choices or GBNF text).
std::optional<ApiError> ReadValue(Kind kind, const json& v, const std::string& param,
                                  constraint::ConstraintSpec& spec) {
  spec.kind = kind;
  switch (kind) {
    case Kind::kJsonSchema:
      return SchemaText(v, param, spec.text);
    case Kind::kChoice:
      return Choices(v, param, spec.choices);
    default:
      return Text(v, param, spec.text);  // regex, GBNF
  }
}

std::optional<ApiError> StructuredOutputs(const json& v, std::optional<constraint::ConstraintSpec>& out) {
  if (!v.is_object()) return WrongType("structured_outputs", "an object");
  constraint::ConstraintSpec spec;
  int set = 0;
  for (const auto& [k, x] : v.items()) {
    if (x.is_null()) continue;
    const std::string param = "structured_outputs." + k;
    std::optional<ApiError> e;
    if (k == "json" || k == "regex" || k == "choice" || k == "grammar") {
      e = ReadValue(k == "json"     ? Kind::kJsonSchema
                    : k == "regex"  ? Kind::kRegex
                    : k == "choice" ? Kind::kChoice
                                    : Kind::kGbnf,
                    x, param, spec);
    } else if (k == "json_object") {
      if (!x.is_boolean()) return WrongType(param, "a boolean");
      if (!x.get<bool>()) continue;
      spec.kind = Kind::kJsonObject;
    } else {
      return BadRequest(
          fmt::format("'{}' is not supported (json, regex, choice, grammar, json_object are)", param), param);
    }
    if (e) return e;
    ++set;
  }
  if (set > 1)
    return BadRequest("'structured_outputs' sets more than one constraint; give one", "structured_outputs");
  if (set == 1) out = std::move(spec);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ReadStructuredOutput(const json& obj, bool chat,
                                             std::optional<constraint::ConstraintSpec>& out) {
  out.reset();
  auto present = [&](const char* k) { return obj.contains(k) && !obj[k].is_null(); };
  // Tool calling is a chat field (server/tool_request.h reads it there).
  if (!chat)
    for (const char* k : {"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"})
      if (present(k)) return BadRequest(fmt::format("'{}' is a chat completions field", k), k);
  for (const char* k : {"guided_decoding_backend", "guided_whitespace_pattern"})
    if (present(k)) return BadRequest(fmt::format("'{}' is not supported", k), k);
  std::vector<std::string> given;
  for (std::string_view k : kStructuredOutputFields)
    if (present(std::string(k).c_str())) given.push_back(std::string(k));
  if (given.size() > 1)
    return BadRequest(fmt::format("'{}' and '{}' both constrain the output; give one", given[0], given[1]),
                      given[1]);
  if (given.empty()) return std::nullopt;
  const std::string k = given[0];
  const json& v = obj[k];
  constraint::ConstraintSpec spec;
  std::optional<ApiError> e;
  if (k == "response_format") {
    if (!chat)
      return BadRequest("'response_format' is a chat completions field; use guided_json or json_schema here",
                        k);
    return ResponseFormat(v, out);
  }
  if (k == "structured_outputs") return StructuredOutputs(v, out);
  const Kind kind = k == "guided_json" || k == "json_schema" ? Kind::kJsonSchema
                    : k == "guided_regex"                    ? Kind::kRegex
                    : k == "guided_choice"                   ? Kind::kChoice
                                                             : Kind::kGbnf;  // guided_grammar, grammar
  e = ReadValue(kind, v, k, spec);
  if (e) return e;
  out = std::move(spec);
  return std::nullopt;
}

}  // namespace ferry::server
