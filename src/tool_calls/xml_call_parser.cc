// The XML-style call formats, where each argument is an element of its own:
//   Qwen3-Coder:      <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
//                     </function>\n</tool_call>
//   DeepSeek V3.2 (DSML): <｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n
//                     <｜DSML｜parameter name="P" string="true|false">VALUE</｜DSML｜parameter>\n...
//                     </｜DSML｜invoke>\n...</｜DSML｜function_calls>
// Each parameter becomes a key of the arguments object once its closing tag is out (a value is
// not streamed while it may still grow into another JSON type). A value is the JSON it spells
// when it is JSON (3, true, {"a": 1}, "quoted"), else the string it is, as the templates render
// strings bare and other values with tojson; DSML's string="true" makes it a string whatever it
// spells.
#include <nlohmann/json.hpp>

#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {
namespace {

struct XmlDialect {
  std::string_view open, close;             // around a turn's calls
  std::string_view function, function_end;  // a call's opening (up to its name) and closing tags
  std::string_view after_name;              // what closes the name in the opening tag
  std::string_view param, param_end;        // a parameter's opening (up to its name) and closing tags
  char param_name_end;                      // what ends a parameter's name ('>' or '"')
  bool trim_newlines;                       // one newline around a value is layout, not value
};

constexpr XmlDialect kQwen3Coder{"<tool_call>", "</tool_call>", "<function=", "</function>", ">",
                                 "<parameter=", "</parameter>", '>',          true};
constexpr XmlDialect kDsml{"<｜DSML｜function_calls>",
                           "</｜DSML｜function_calls>",
                           "<｜DSML｜invoke name=\"",
                           "</｜DSML｜invoke>",
                           "\">",
                           "<｜DSML｜parameter name=\"",
                           "</｜DSML｜parameter>",
                           '"',
                           false};

std::string JsonString(std::string_view v) {
  return nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ValueJson(std::string_view v, const XmlDialect& d, bool is_string) {
  if (d.trim_newlines) {
    if (v.starts_with('\n')) v.remove_prefix(1);
    if (v.ends_with('\n')) v.remove_suffix(1);
  }
  if (!is_string && nlohmann::json::accept(v)) return nlohmann::json::parse(v).dump();
  return JsonString(v);
}

// The text before a call: content, less the opener of the calls' block.
void TextBeforeCall(std::string_view s, const XmlDialect& d, Builder& b) {
  size_t end = s.size();
  while (end > 0 && IsSpace(s[end - 1])) --end;
  if (std::string_view(s.substr(0, end)).ends_with(d.open)) s = s.substr(0, end - d.open.size());
  b.Text(s);
}

// The parameters of the call whose opening tag ended at `pos`. Returns where scanning goes
// on, npos when the output ends inside the call.
size_t ReadParameters(std::string_view text, size_t pos, const XmlDialect& d, ToolCall& call, Builder& b) {
  call.arguments = "{";
  bool first = true;
  while (true) {
    const size_t p = SkipJsonSpace(text, pos);
    const std::string_view rest = text.substr(p);
    if (rest.starts_with(d.function_end)) {
      call.arguments += "}";
      call.complete = true;
      size_t q = SkipJsonSpace(text, p + d.function_end.size());
      const std::string_view after = text.substr(q);
      if (after.starts_with(d.close)) {
        q += d.close.size();
      } else if (!b.final() && !after.empty() && d.close.starts_with(after)) {
        b.Call(std::move(call));
        return npos;  // the closer may be on its way
      } else {
        q = p + d.function_end.size();
      }
      b.Call(std::move(call));
      return q;
    }
    if (rest.starts_with(d.param)) {
      const size_t name_at = p + d.param.size(), name_end = text.find(d.param_name_end, name_at);
      const size_t header_end = name_end == npos ? npos : text.find('>', name_end);
      if (header_end == npos) break;
      // DSML's attributes after the name: string="true" marks a string value.
      const std::string_view attrs = text.substr(name_end, header_end - name_end);
      const bool is_string = attrs.find("string=\"true\"") != npos;
      const size_t value_at = header_end + 1, value_end = text.find(d.param_end, value_at);
      if (value_end == npos) break;
      call.arguments += first ? "" : ", ";
      call.arguments += JsonString(text.substr(name_at, name_end - name_at));
      call.arguments += ": " + ValueJson(text.substr(value_at, value_end - value_at), d, is_string);
      first = false;
      pos = value_end + d.param_end.size();
      continue;
    }
    if (!b.final() && (d.param.starts_with(rest) || d.function_end.starts_with(rest))) break;
    // Neither a parameter nor the end: the call ends here, the rest is content.
    call.arguments += "}";
    call.complete = true;
    b.Call(std::move(call));
    return p;
  }
  b.Call(std::move(call));  // the output ends inside the call
  return npos;
}

void ParseXmlCalls(std::string_view text, const XmlDialect& d, Builder& b) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t f = text.find(d.function, pos);
    if (f == npos) {
      std::string_view tail = text.substr(pos);
      if (!b.final()) {
        // Held back: a partial call opening, and a block opener (with whitespace) still waiting for one.
        tail.remove_suffix(PendingSuffix(tail, {d.function}));
        size_t end = tail.size();
        while (end > 0 && IsSpace(tail[end - 1])) --end;
        if (tail.substr(0, end).ends_with(d.open))
          tail = tail.substr(0, end - d.open.size());
        else
          tail.remove_suffix(PendingSuffix(tail, {d.open}));
      }
      return b.Text(tail);
    }
    const size_t name_at = f + d.function.size(), name_end = NameEnd(text, name_at);
    const std::string_view after = text.substr(name_end);
    if (!b.final() && name_end == text.size()) return TextBeforeCall(text.substr(pos, f - pos), d, b);
    if (!b.final() && d.after_name.starts_with(after) && after.size() < d.after_name.size())
      return TextBeforeCall(text.substr(pos, f - pos), d, b);  // the name's closing is on its way
    if (name_end == name_at || !after.starts_with(d.after_name)) {
      b.Text(text.substr(pos, name_at - pos));  // not a call: the opening tag is text
      pos = name_at;
      continue;
    }
    TextBeforeCall(text.substr(pos, f - pos), d, b);
    ToolCall call;
    call.name = std::string(text.substr(name_at, name_end - name_at));
    pos = ReadParameters(text, name_end + d.after_name.size(), d, call, b);
    if (pos == npos) return;
  }
}

}  // namespace

void ParseQwen3Coder(std::string_view text, Builder& b) {
  ParseXmlCalls(text, kQwen3Coder, b);
}

void ParseDsml(std::string_view text, Builder& b) {
  ParseXmlCalls(text, kDsml, b);
}

}  // namespace ferry::tool_calls::internal
