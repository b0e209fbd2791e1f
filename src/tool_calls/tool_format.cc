#include "tool_calls/tool_format.h"

namespace ferry::tool_calls {

ToolFormat DetectToolFormat(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("[TOOL_CALLS]")) return has("[ARGS]") ? ToolFormat::kMistralV11 : ToolFormat::kMistralV3;
  // Qwen3-Coder writes <tool_call><function=name>... (XML parameters), not JSON.
  if (has("<tool_call>") && !has("<function=")) return ToolFormat::kHermes;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("ipython"))) return ToolFormat::kLlama3;
  return ToolFormat::kGeneric;
}

const char* ToolFormatName(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes:
      return "hermes";
    case ToolFormat::kLlama3:
      return "llama3";
    case ToolFormat::kMistralV3:
      return "mistral-v3";
    case ToolFormat::kMistralV11:
      return "mistral-v11";
    case ToolFormat::kGeneric:
      return "generic";
  }
  return "generic";
}

std::string_view CallOpener(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes:
      return "<tool_call>";
    case ToolFormat::kLlama3:
      return "<|python_tag|>";
    case ToolFormat::kMistralV3:
    case ToolFormat::kMistralV11:
      return "[TOOL_CALLS]";
    case ToolFormat::kGeneric:
      return "";
  }
  return "";
}

}  // namespace ferry::tool_calls
