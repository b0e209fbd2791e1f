// Functionary v3.1 and v3.2 (MeetKai), two wire formats of one family:
//   v3.1 (Llama 3.1 based): <function=NAME>{...}</function>, repeated, text around is content;
//   v3.2: the prompt ends in ">>>"; the model writes a recipient line, "all" for text to the
//   user or a function's name for a call whose body is its JSON arguments, and ">>>" before
//   each further one: "all\nLet me look.>>>get_weather\n{...}".
// (A python recipient with bare code is not parsed as a call.)
#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {
namespace {

constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>", kNext = ">>>";

}  // namespace

void ParseFunctionaryV31(std::string_view text, Builder& b) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t f = text.find(kFunction, pos);
    if (f == npos) return b.TailText(text.substr(pos), kFunction);
    const size_t name_at = f + kFunction.size(), name_end = NameEnd(text, name_at);
    if (name_end == text.size() && !b.final()) return b.Text(text.substr(pos, f - pos));
    if (name_end == name_at || name_end == text.size() || text[name_end] != '>') {
      b.Text(text.substr(pos, name_at - pos));  // not a call: "<function=" is text
      pos = name_at;
      continue;
    }
    b.Text(text.substr(pos, f - pos));
    ToolCall call;
    call.name = std::string(text.substr(name_at, name_end - name_at));
    size_t invalid = npos;
    size_t next = ReadArguments(text, name_end + 1, call, invalid);
    b.Call(std::move(call));
    if (next == npos) {
      if (invalid == npos) return;  // the output ends inside the arguments
      pos = invalid;                // not JSON from here: content
      continue;
    }
    if (Expect(text, next, kFunctionEnd, b) == CallState::kUndecided) return;
    pos = next;
  }
}

void ParseFunctionaryV32(std::string_view text, Builder& b) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t word_end = NameEnd(text, pos);
    if (word_end == text.size() && !b.final()) return;  // the recipient line is not complete
    if (word_end == pos || word_end == text.size() || text[word_end] != '\n') return b.Text(text.substr(pos));
    const std::string_view recipient = text.substr(pos, word_end - pos);
    const size_t body_at = word_end + 1;
    if (recipient == "all") {
      const size_t e = text.find(kNext, body_at);
      if (e == npos) return b.TailText(text.substr(body_at), kNext);
      b.Text(text.substr(body_at, e - body_at));
      pos = e + kNext.size();
      continue;
    }
    ToolCall call;
    call.name = std::string(recipient);
    size_t invalid = npos;
    size_t next = ReadArguments(text, body_at, call, invalid);
    b.Call(std::move(call));
    if (next == npos) return invalid == npos ? void() : b.Text(text.substr(invalid));
    const CallState more = Expect(text, next, kNext, b);
    if (more == CallState::kUndecided) return;
    if (more == CallState::kNotCall) return b.Text(text.substr(next));
    pos = next;
  }
}

}  // namespace ferry::tool_calls::internal
