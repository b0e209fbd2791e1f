// The tool-call wire formats of the model families Ferry parses, and which one a chat
// template uses (read from the template's source, as llama.cpp's chat-parser selection does).
#pragma once

#include <string>
#include <string_view>

namespace ferry::tool_calls {

enum class ToolFormat {
  // Hermes 2 Pro / Qwen2.5 / Qwen3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated.
  kHermes,
  // Llama 3.1-3.3: {"name": ..., "parameters": {...}} as the whole answer, or after <|python_tag|>;
  // several separated by ';'.
  kLlama3,
  // Mistral v3 (Nemo, Large 2407): [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...].
  kMistralV3,
  // Mistral v11+ (Small 3.2, Ministral 3): [TOOL_CALLS]name[ARGS]{...}, repeated.
  kMistralV11,
  // Any other template: {"tool_calls": [{"name": ..., "arguments": {...}}]} as the whole answer
  // (the tools and this format are described to the model in a system message).
  kGeneric,
};

// The format a template's source implies; kGeneric when it names none Ferry knows.
// (Qwen3-Coder's XML <function=...> form, Functionary, DeepSeek, Command R7B, Granite and
// gpt-oss are not parsed yet: they fall back to kGeneric.)
ToolFormat DetectToolFormat(std::string_view template_source);
const char* ToolFormatName(ToolFormat f);

// The text that opens a call in the format (the parser's trigger), "" when a call is
// recognised by its JSON alone (kLlama3 without <|python_tag|>, kGeneric).
std::string_view CallOpener(ToolFormat f);

}  // namespace ferry::tool_calls
