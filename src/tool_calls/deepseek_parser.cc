// DeepSeek's calls, both generations in one parser (the markers are the same):
//   R1 / V3:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
//   V3.1:     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
// calls separated by optional whitespace, the list closed by <｜tool▁calls▁end｜>; text
// before the list (and after it) is content.
#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {
namespace {

constexpr std::string_view kBegin = "<｜tool▁calls▁begin｜>", kCallBegin = "<｜tool▁call▁begin｜>",
                           kSep = "<｜tool▁sep｜>", kCallEnd = "<｜tool▁call▁end｜>",
                           kEnd = "<｜tool▁calls▁end｜>", kFence = "```json", kFenceEnd = "```";

// One call from just after <｜tool▁call▁begin｜>. Returns where scanning goes on; npos: stop
// (the output ends inside it). kNotCall in `st` when it is not a call (nothing added).
size_t ReadCallAt(std::string_view text, size_t pos, Builder& b, CallState& st) {
  st = CallState::kNotCall;
  const size_t word_end = NameEnd(text, pos);
  const std::string_view after_word = text.substr(word_end);
  if (!b.final() && (after_word.empty() || (kSep.starts_with(after_word)))) {
    st = CallState::kUndecided;
    return npos;
  }
  if (word_end == pos || !after_word.starts_with(kSep)) return npos;
  ToolCall call;
  size_t args_at = word_end + kSep.size();
  const bool r1 = text.substr(pos, word_end - pos) == "function";
  if (r1) {  // the type, then NAME\n```json\n
    const size_t name_end = NameEnd(text, args_at);
    if (name_end == text.size() && !b.final()) {
      st = CallState::kUndecided;
      return npos;
    }
    if (name_end == args_at || text[name_end] != '\n') return npos;
    call.name = std::string(text.substr(args_at, name_end - args_at));
    args_at = name_end;
  } else {
    call.name = std::string(text.substr(pos, word_end - pos));
  }
  st = CallState::kCall;
  if (r1) {
    const CallState fence = Expect(text, args_at, kFence, b);
    if (fence != CallState::kCall) {
      if (fence == CallState::kNotCall) {  // no arguments: the rest is content
        call.arguments = "{}";
        call.complete = true;
      }
      b.Call(std::move(call));
      return fence == CallState::kNotCall ? args_at : npos;
    }
  }
  size_t invalid = npos;
  size_t next = ReadArguments(text, args_at, call, invalid);
  b.Call(std::move(call));
  if (next == npos) return invalid;  // npos: the text ends inside the arguments
  for (std::string_view closer : {r1 ? kFenceEnd : std::string_view(), kCallEnd}) {
    if (closer.empty()) continue;
    const CallState c = Expect(text, next, closer, b);
    if (c == CallState::kUndecided) return npos;
    if (c == CallState::kNotCall) break;
  }
  return next;
}

}  // namespace

void ParseDeepSeek(std::string_view text, Builder& b) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t m = text.find(kBegin, pos);
    if (m == npos) return b.TailText(text.substr(pos), kBegin);
    b.Text(text.substr(pos, m - pos));
    size_t p = m + kBegin.size();
    bool any = false;
    while (true) {
      const CallState end = Expect(text, p, kEnd, b);
      if (end == CallState::kCall) break;
      size_t q = p;
      const CallState begin = Expect(text, q, kCallBegin, b);
      if (end == CallState::kUndecided || begin == CallState::kUndecided) {
        if (b.final() && !any) b.Text(text.substr(m));
        return;  // the list goes on or ends: not decided yet
      }
      if (begin == CallState::kNotCall) {  // the list ends without its closer
        if (!any) b.Text(text.substr(m, p - m));
        break;
      }
      CallState st;
      const size_t next = ReadCallAt(text, q, b, st);
      if (st == CallState::kUndecided) {
        if (b.final() && !any) b.Text(text.substr(m));
        return;
      }
      if (st == CallState::kNotCall) {
        if (!any) b.Text(text.substr(m, q - m));
        p = q;
        break;
      }
      any = true;
      if (next == npos) return;
      p = next;
    }
    pos = p;
  }
}

}  // namespace ferry::tool_calls::internal
