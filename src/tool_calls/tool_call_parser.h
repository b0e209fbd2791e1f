// Tool-call parsers: a model's answer (reasoning already split off) read as text and calls
// in its family's wire format (tool_format.h). The parse works on the text so far and is
// monotone: parsing a prefix gives a prefix of the full parse (content a prefix of the full
// content, the calls so far with the same names and arguments that are prefixes of the
// final ones), so a stream can send what it finds and never retract. Text that may still
// turn into a call (a partial opener, a JSON object whose keys are not known yet, trailing
// whitespace) is held back until it is decided, or until `final`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tool_calls/tool_format.h"

namespace ferry::tool_calls {

struct ToolCall {
  std::string name;
  // The arguments as the model wrote them (a JSON object's text); a JSON string value is
  // given decoded, once complete. Incomplete when the output ended inside the call.
  std::string arguments;
  bool complete = false;
};

struct ToolParse {
  std::string content;  // the text outside calls (whitespace around calls dropped)
  // Text of a reasoning channel the format marks itself (Harmony's analysis channel, Command
  // R7B's thinking); <think> blocks are split before parsing, by token id (server/chat_output).
  std::string reasoning;
  std::vector<ToolCall> calls;
};

// final: the output is complete (held-back text is released; a call whose name never
// completed is content).
ToolParse ParseToolCalls(ToolFormat format, std::string_view text, bool final);

// The parse of a prefix is a prefix of `full` (the invariant streaming relies on).
bool IsPrefixParse(const ToolParse& prefix, const ToolParse& full);

}  // namespace ferry::tool_calls
