// The tool-calling fields of a chat request, validated: OpenAI's `tools`, `tool_choice`,
// `parallel_tool_calls`, and the `chat_template_kwargs` (vLLM's, llama-server's) that go to
// the template. A field or shape the server does not support is a 400 naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "tool_calls/tool_grammar.h"

namespace ferry::server {

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  std::vector<tool_calls::ToolDef> tools;
  nlohmann::ordered_json tools_json;  // the tools as sent, for the chat template (null: none)
  Choice choice = Choice::kAuto;
  std::string named;  // kNamed: the function
  bool parallel = true;
  // Calls are parsed from the answer (tools given and tool_choice not "none").
  bool parse() const { return !tools.empty() && choice != Choice::kNone; }
  // The answer must be a call: tool_choice "required" or a named function.
  bool forced() const { return choice == Choice::kRequired || choice == Choice::kNamed; }
  // The tools a forced call may use.
  std::vector<tool_calls::ToolDef> Allowed() const;
};

// The request fields read here.
inline constexpr std::string_view kToolRequestFields[] = {"tools", "tool_choice", "parallel_tool_calls",
                                                          "chat_template_kwargs"};

// obj: the request body. template_kwargs: chat_template_kwargs (an object; empty when absent).
std::optional<ApiError> ReadToolRequest(const nlohmann::ordered_json& obj, ToolRequest& out,
                                        nlohmann::ordered_json& template_kwargs);

// A history message's tool fields: an assistant's tool_calls (arguments strings given to the
// template as the JSON objects they hold, as llama.cpp does: the templates `tojson` them) and
// a tool message's tool_call_id. `m` is edited in place.
std::optional<ApiError> ReadToolMessage(nlohmann::ordered_json& m, size_t index);

}  // namespace ferry::server
