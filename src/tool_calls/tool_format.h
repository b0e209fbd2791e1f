// The tool-call wire formats of the model families Ferry parses, and which one a chat
// template uses (read from the template's source, as llama.cpp's chat-parser selection does).
#pragma once

#include <string>
#include <string_view>

namespace ferry::tool_calls {

enum class ToolFormat {
  // Hermes 2 Pro / Qwen2.5 / Qwen3 / Granite 4: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
  // repeated.
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
  // Qwen3-Coder: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>.
  kQwen3Coder,
  // gpt-oss Harmony: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>;
  // the analysis channel is reasoning, the final channel the answer.
  kHarmony,
  // DeepSeek R1 / V3:
  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...
  kDeepSeekR1,
  // DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
  kDeepSeekV31,
  // Functionary v3.1 (Llama 3.1): <function=NAME>{...}</function>, repeated.
  kFunctionaryV31,
  // Functionary v3.2: after the prompt's ">>>", "all\ntext" or "NAME\n{...}", joined by ">>>".
  kFunctionaryV32,
  // Command R7B: <|START_THINKING|>...<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0",
  // "tool_name": NAME, "parameters": {...}}, ...]<|END_ACTION|>, or <|START_RESPONSE|>text<|END_RESPONSE|>.
  kCommandR7B,
  // Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}, ...].
  kGranite,
  // DeepSeek V3.2 (DSML): <｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n
  // <｜DSML｜parameter name="P" string="true|false">VALUE</｜DSML｜parameter>\n...</｜DSML｜invoke>\n
  // ...</｜DSML｜function_calls>.
  kDeepSeekV32,
};

inline constexpr int kNumToolFormats = static_cast<int>(ToolFormat::kDeepSeekV32) + 1;

// The format a template's source implies; kGeneric when it names none Ferry knows.
ToolFormat DetectToolFormat(std::string_view template_source);
const char* ToolFormatName(ToolFormat f);

// The text that opens a call in the format (the parser's trigger, and where a lazy grammar
// for tool_choice auto starts), "" when a call has no opener of its own (kLlama3 without
// <|python_tag|>, kGeneric, kHarmony whose <|channel|> opens any message, kFunctionaryV32).
std::string_view CallOpener(ToolFormat f);

}  // namespace ferry::tool_calls
