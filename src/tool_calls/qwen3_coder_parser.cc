// Qwen3-Coder's XML calls: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
// </function>\n</tool_call>. Each parameter becomes a key of the arguments object once its
// </parameter> is out (a value is not streamed while it may still grow into another JSON
// type); a value is the JSON it spells when it is JSON (3, true, {"a": 1}, "quoted"), else
// the string it is, as the template renders strings bare and other values with tojson.
#include <nlohmann/json.hpp>

#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>",
                           kFunction = "<function=", kFunctionEnd = "</function>",
                           kParam = "<parameter=", kParamEnd = "</parameter>";

std::string ValueJson(std::string_view v) {
  if (v.starts_with('\n')) v.remove_prefix(1);
  if (v.ends_with('\n')) v.remove_suffix(1);
  if (nlohmann::json::accept(v)) return nlohmann::json::parse(v).dump();
  return nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The text before a call: content, less the <tool_call> that opened it.
void TextBeforeCall(std::string_view s, Builder& b) {
  size_t end = s.size();
  while (end > 0 && IsSpace(s[end - 1])) --end;
  if (std::string_view(s.substr(0, end)).ends_with(kOpen)) s = s.substr(0, end - kOpen.size());
  b.Text(s);
}

// The parameters of the call whose name ended at `pos` ('>' follows). Returns where scanning
// goes on, npos when the output ends inside the call.
size_t ReadParameters(std::string_view text, size_t pos, ToolCall& call, Builder& b) {
  call.arguments = "{";
  bool first = true;
  while (true) {
    const size_t p = SkipJsonSpace(text, pos);
    const std::string_view rest = text.substr(p);
    if (rest.starts_with(kFunctionEnd)) {
      call.arguments += "}";
      call.complete = true;
      size_t q = SkipJsonSpace(text, p + kFunctionEnd.size());
      const std::string_view after = text.substr(q);
      if (after.starts_with(kClose)) {
        q += kClose.size();
      } else if (!b.final() && !after.empty() && kClose.starts_with(after)) {
        b.Call(std::move(call));
        return npos;  // the closer may be on its way
      } else {
        q = p + kFunctionEnd.size();
      }
      b.Call(std::move(call));
      return q;
    }
    if (rest.starts_with(kParam)) {
      const size_t name_at = p + kParam.size(), name_end = text.find('>', name_at);
      if (name_end == npos) break;
      const size_t value_at = name_end + 1, value_end = text.find(kParamEnd, value_at);
      if (value_end == npos) break;
      call.arguments += first ? "" : ", ";
      call.arguments += nlohmann::json(std::string(text.substr(name_at, name_end - name_at)))
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      call.arguments += ": " + ValueJson(text.substr(value_at, value_end - value_at));
      first = false;
      pos = value_end + kParamEnd.size();
      continue;
    }
    if (!b.final() && (kParam.starts_with(rest) || kFunctionEnd.starts_with(rest))) break;
    // Neither a parameter nor the end: the call ends here, the rest is content.
    call.arguments += "}";
    call.complete = true;
    b.Call(std::move(call));
    return p;
  }
  b.Call(std::move(call));  // the output ends inside the call
  return npos;
}

}  // namespace

void ParseQwen3Coder(std::string_view text, Builder& b) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t f = text.find(kFunction, pos);
    if (f == npos) {
      std::string_view tail = text.substr(pos);
      if (!b.final()) {
        // Held back: a partial <function=, and an opener (with whitespace) still waiting for one.
        tail.remove_suffix(PendingSuffix(tail, {kFunction}));
        size_t end = tail.size();
        while (end > 0 && IsSpace(tail[end - 1])) --end;
        if (tail.substr(0, end).ends_with(kOpen))
          tail = tail.substr(0, end - kOpen.size());
        else
          tail.remove_suffix(PendingSuffix(tail, {kOpen}));
      }
      return b.Text(tail);
    }
    const size_t name_at = f + kFunction.size(), name_end = NameEnd(text, name_at);
    if (name_end == text.size() && !b.final()) return TextBeforeCall(text.substr(pos, f - pos), b);
    if (name_end == name_at || name_end == text.size() || text[name_end] != '>') {
      b.Text(text.substr(pos, name_at - pos));  // not a call: "<function=" is text
      pos = name_at;
      continue;
    }
    TextBeforeCall(text.substr(pos, f - pos), b);
    ToolCall call;
    call.name = std::string(text.substr(name_at, name_end - name_at));
    pos = ReadParameters(text, name_end + 1, call, b);
    if (pos == npos) return;
  }
}

}  // namespace ferry::tool_calls::internal
