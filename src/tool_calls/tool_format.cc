#include "tool_calls/tool_format.h"

namespace ferry::tool_calls {

ToolFormat DetectToolFormat(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  // Most specific markers first: Functionary v3.1 also writes <|python_tag|>, Granite 4's
  // tool-call template both <tool_call> and <|tool_call|>, Qwen3-Coder <tool_call> too.
  if (has("<|channel|>") && has("<|message|>")) return ToolFormat::kHarmony;
  if (has("｜DSML｜")) return ToolFormat::kDeepSeekV32;
  if (has("tool▁calls▁begin")) return has("```json") ? ToolFormat::kDeepSeekR1 : ToolFormat::kDeepSeekV31;
  if (has("<|START_ACTION|>")) return ToolFormat::kCommandR7B;
  if (has("[TOOL_CALLS]")) return has("[ARGS]") ? ToolFormat::kMistralV11 : ToolFormat::kMistralV3;
  if (has("<function=")) return has("<parameter=") ? ToolFormat::kQwen3Coder : ToolFormat::kFunctionaryV31;
  if (has(">>>all")) return ToolFormat::kFunctionaryV32;
  if (has("<tool_call>")) return ToolFormat::kHermes;
  if (has("<|tool_call|>")) return ToolFormat::kGranite;
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
    case ToolFormat::kQwen3Coder:
      return "qwen3-coder";
    case ToolFormat::kHarmony:
      return "harmony";
    case ToolFormat::kDeepSeekR1:
      return "deepseek-r1";
    case ToolFormat::kDeepSeekV31:
      return "deepseek-v3.1";
    case ToolFormat::kFunctionaryV31:
      return "functionary-v3.1";
    case ToolFormat::kFunctionaryV32:
      return "functionary-v3.2";
    case ToolFormat::kCommandR7B:
      return "command-r7b";
    case ToolFormat::kGranite:
      return "granite";
    case ToolFormat::kDeepSeekV32:
      return "deepseek-v3.2";
  }
  return "generic";
}

std::string_view CallOpener(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes:
    case ToolFormat::kQwen3Coder:
      return "<tool_call>";
    case ToolFormat::kLlama3:
      return "<|python_tag|>";
    case ToolFormat::kMistralV3:
    case ToolFormat::kMistralV11:
      return "[TOOL_CALLS]";
    case ToolFormat::kDeepSeekR1:
    case ToolFormat::kDeepSeekV31:
      return "<｜tool▁calls▁begin｜>";
    case ToolFormat::kFunctionaryV31:
      return "<function=";
    case ToolFormat::kCommandR7B:
      return "<|START_ACTION|>";
    case ToolFormat::kGranite:
      return "<|tool_call|>";
    case ToolFormat::kDeepSeekV32:
      return "<｜DSML｜function_calls>";
    case ToolFormat::kGeneric:
    case ToolFormat::kHarmony:
    case ToolFormat::kFunctionaryV32:
      return "";
  }
  return "";
}

}  // namespace ferry::tool_calls
