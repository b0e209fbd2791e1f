// ToolCallStream: the deltas of a streamed answer with tool calls. It re-parses the text so
// far (outputs are short; parsing is linear) and sends what the parse adds: content, then
// per call its header (index, name) once and argument fragments that only ever append, as
// OpenAI's delta.tool_calls do. Streaming token by token, in one piece, or not at all gives
// the same calls (the parser is monotone: tool_call_parser.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tool_calls/tool_call_parser.h"

namespace ferry::tool_calls {

struct ToolCallDelta {
  size_t index = 0;
  bool opened = false;  // the call's first delta: carries the name
  std::string name;
  std::string arguments;  // the new fragment
};

struct StreamDelta {
  std::string content;
  std::string reasoning;  // a reasoning channel of the format's own (ToolParse::reasoning)
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && reasoning.empty() && calls.empty(); }
};

class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat format) : format_(format) {}
  // Appends the answer's new text.
  StreamDelta Push(std::string_view text);
  // The output is complete: what was held back.
  StreamDelta Finish();
  // What has been sent so far (after Finish: the whole answer).
  const ToolParse& sent() const { return sent_; }

 private:
  StreamDelta Advance(bool final);
  ToolFormat format_;
  std::string text_;
  ToolParse sent_;
};

}  // namespace ferry::tool_calls
