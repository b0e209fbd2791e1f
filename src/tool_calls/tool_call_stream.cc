#include "tool_calls/tool_call_stream.h"

namespace ferry::tool_calls {

StreamDelta ToolCallStream::Push(std::string_view text) {
  text_ += text;
  return Advance(false);
}

StreamDelta ToolCallStream::Finish() {
  return Advance(true);
}

StreamDelta ToolCallStream::Advance(bool final) {
  ToolParse next = ParseToolCalls(format_, text_, final);
  StreamDelta d;
  // The parser is monotone; should it ever not be, nothing sent is retracted: only the
  // parts that extend what was sent go out.
  if (next.content.size() > sent_.content.size() && next.content.starts_with(sent_.content)) {
    d.content = next.content.substr(sent_.content.size());
    sent_.content = std::move(next.content);
  }
  if (next.reasoning.size() > sent_.reasoning.size() && next.reasoning.starts_with(sent_.reasoning)) {
    d.reasoning = next.reasoning.substr(sent_.reasoning.size());
    sent_.reasoning = std::move(next.reasoning);
  }
  for (size_t i = 0; i < next.calls.size(); ++i) {
    ToolCall& c = next.calls[i];
    if (i >= sent_.calls.size()) {
      if (i > sent_.calls.size()) break;
      d.calls.push_back({i, true, c.name, c.arguments});
      sent_.calls.push_back(std::move(c));
      continue;
    }
    ToolCall& s = sent_.calls[i];
    if (c.name != s.name) break;
    if (c.arguments.size() > s.arguments.size() && c.arguments.starts_with(s.arguments)) {
      d.calls.push_back({i, false, "", c.arguments.substr(s.arguments.size())});
      s.arguments = std::move(c.arguments);
    }
    s.complete = c.complete;
  }
  return d;
}

}  // namespace ferry::tool_calls
