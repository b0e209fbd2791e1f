// Command R7B: <|START_THINKING|>plan<|END_THINKING|> (reasoning), then either
// <|START_RESPONSE|>text<|END_RESPONSE|> (content) or <|START_ACTION|>[{"tool_call_id": "0",
// "tool_name": NAME, "parameters": {...}}, ...]<|END_ACTION|> (calls). The markers are
// dropped; text outside them is content.
#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {
namespace {

constexpr std::string_view kThink = "<|START_THINKING|>", kThinkEnd = "<|END_THINKING|>",
                           kResponse = "<|START_RESPONSE|>", kResponseEnd = "<|END_RESPONSE|>",
                           kAction = "<|START_ACTION|>", kActionEnd = "<|END_ACTION|>";
constexpr std::string_view kMarkers[] = {kThink, kThinkEnd, kResponse, kResponseEnd, kAction, kActionEnd};
constexpr CallKeys kKeys{"tool_name", "parameters", "parameters"};

}  // namespace

void ParseCommandR7B(std::string_view text, Builder& b) {
  size_t pos = 0;
  bool thinking = false;
  while (pos <= text.size()) {
    size_t m = npos;
    std::string_view marker;
    for (std::string_view k : kMarkers) {
      const size_t at = text.find(k, pos);
      if (at < m) {
        m = at;
        marker = k;
      }
    }
    std::string_view before = text.substr(pos, (m == npos ? text.size() : m) - pos);
    if (m == npos && !b.final())
      before.remove_suffix(
          PendingSuffix(before, {kThink, kThinkEnd, kResponse, kResponseEnd, kAction, kActionEnd}));
    thinking ? b.Reasoning(before) : b.Text(before);
    if (m == npos) return;
    pos = m + marker.size();
    if (marker == kThink || marker == kThinkEnd) {
      thinking = marker == kThink;
      continue;
    }
    if (marker != kAction) continue;
    const size_t j = SkipJsonSpace(text, pos);
    if (j >= text.size()) return;  // the calls have not begun
    size_t next = npos;
    const CallState st = text[j] == '[' ? CallList(text, j, b, next, kKeys) : CallState::kNotCall;
    if (st == CallState::kUndecided) return;
    if (st == CallState::kNotCall) {
      b.Text(kAction);
      continue;
    }
    if (Expect(text, next, kActionEnd, b) == CallState::kUndecided) return;
    pos = next;
  }
}

}  // namespace ferry::tool_calls::internal
