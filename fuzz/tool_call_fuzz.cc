// libFuzzer target: the tool-call parsers (every format) and the streaming differ on arbitrary
// model output. Beyond memory errors it checks the property streaming relies on: the parse of
// every prefix is a prefix of the whole parse, and the text streamed in pieces (sizes from the
// input) gives exactly the calls and content of the whole. The first byte picks the format
// and the piece size (the first byte's high nibble).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tool_calls/tool_call_stream.h"

using namespace ferry::tool_calls;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ToolFormat format = static_cast<ToolFormat>(data[0] % kNumToolFormats);
  const size_t piece = 1 + (data[0] >> 4);
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (text.size() > 4096) text = text.substr(0, 4096);  // every prefix is parsed: quadratic
  const ToolParse whole = ParseToolCalls(format, text, true);
  for (size_t n = 0; n <= text.size(); n += piece)
    if (!IsPrefixParse(ParseToolCalls(format, text.substr(0, n), false), whole)) std::abort();
  ToolCallStream stream(format);
  ToolParse folded;
  auto fold = [&](const StreamDelta& d) {
    folded.content += d.content;
    folded.reasoning += d.reasoning;
    for (const ToolCallDelta& c : d.calls) {
      if (c.opened) {
        if (c.index != folded.calls.size()) std::abort();
        folded.calls.push_back({c.name, "", false});
      }
      if (c.index >= folded.calls.size()) std::abort();
      folded.calls[c.index].arguments += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += piece) fold(stream.Push(text.substr(i, piece)));
  fold(stream.Finish());
  if (folded.content != whole.content || folded.reasoning != whole.reasoning ||
      folded.calls.size() != whole.calls.size())
    std::abort();
  for (size_t i = 0; i < whole.calls.size(); ++i)
    if (folded.calls[i].name != whole.calls[i].name || folded.calls[i].arguments != whole.calls[i].arguments)
      std::abort();
  return 0;
}
