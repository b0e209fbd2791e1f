// String formatting: str.format() fields and printf-style `str % args`, the subset templates use.
#include "template/builtins.h"
#include "template/error.h"
#include "template/methods.h"

namespace ferry::tmpl {

std::string PyFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      Raise("ValueError", "Single '}}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t end = fmt.find('}', i);
    if (end == std::string::npos) Raise("ValueError", "Single '{{' encountered in format string");
    std::string field = fmt.substr(i + 1, end - i - 1);
    i = end;
    char conv = 0;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) RaiseUnsupported("str.format field '{{{}}}'", field);
      conv = field[bang + 1];
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos || field.find('[') != std::string::npos)
      RaiseUnsupported("str.format field '{{{}}}'", field);
    Value v;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t idx = field.empty() ? auto_index++ : static_cast<size_t>(std::atoi(field.c_str()));
      if (idx >= args.pos.size()) Raise("IndexError", "Replacement index {} out of range for positional args tuple", idx);
      v = args.pos[idx];
    } else {
      bool found = false;
      for (const auto& [k, x] : args.kw)
        if (k == field) v = x, found = true;
      if (!found) Raise("KeyError", "'{}'", field);
    }
    if (conv == 'r') out += Repr(v);
    else if (conv == 's' || conv == 0) out += ToStr(v);
    else Raise("ValueError", "Unknown conversion specifier {}", conv);
    CheckStringLength(out.size());
  }
  return out;
}

std::string PercentFormat(const std::string& fmt, const Value& args) {
  List items = args.is_tuple() ? args.list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) Raise("ValueError", "incomplete format");
    char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= items.size()) Raise("TypeError", "not enough arguments for format string");
    const Value& v = items[next++];
    switch (c) {
      case 's': out += ToStr(v); break;
      case 'r': out += Repr(v); break;
      case 'd':
      case 'i':
        if (!v.is_number()) Raise("TypeError", "%{} format: a real number is required, not {}", c, v.TypeName());
        out += std::to_string(v.is_float() ? static_cast<int64_t>(v.float_value()) : v.int_value());
        break;
      default: RaiseUnsupported("printf-style format '%{}'", c);
    }
    CheckStringLength(out.size());
  }
  if (next < items.size()) Raise("TypeError", "not all arguments converted during string formatting");
  return out;
}

}  // namespace ferry::tmpl
