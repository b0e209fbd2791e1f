// Python str/list/dict methods with CPython's semantics for the cases templates use.
#include "template/methods.h"

#include <clocale>
#include <cwctype>
#include <locale.h>

#include <algorithm>
#include <set>

#include "base/utf8.h"
#include "template/builtins.h"
#include "template/error.h"

namespace ferry::tmpl {
namespace {

const std::set<std::string> kStrMethods = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "format", "join", "find", "rfind", "index", "rindex", "count", "isdigit",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "removeprefix", "removesuffix",
    "partition", "rpartition", "swapcase", "casefold", "zfill", "center", "ljust", "rjust", "istitle"};
const std::set<std::string> kListMethods = {"index", "count", "copy"};
const std::set<std::string> kListUnsafe = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
const std::set<std::string> kDictMethods = {"items", "keys", "values", "get", "copy"};
const std::set<std::string> kDictUnsafe = {"pop", "popitem", "setdefault", "update", "clear"};

// Length in bytes of a Unicode whitespace code point starting at s[i] (0 if none).
size_t SpaceAt(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  if (c == 0xC2 && (at(1) == 0x85 || at(1) == 0xA0)) return 2;
  if (c == 0xE1 && at(1) == 0x9A && at(2) == 0x80) return 3;
  if (c == 0xE2 && at(1) == 0x80 && (at(2) <= 0x8A || at(2) == 0xA8 || at(2) == 0xA9 || at(2) == 0xAF)) return 3;
  if (c == 0xE2 && at(1) == 0x81 && at(2) == 0x9F) return 3;
  if (c == 0xE3 && at(1) == 0x80 && at(2) == 0x80) return 3;
  return 0;
}
// Whitespace code point ending at s[end-1]: its length, or 0.
size_t SpaceBefore(const std::string& s, size_t end) {
  for (size_t len = 1; len <= 3 && len <= end; ++len)
    if (SpaceAt(s, end - len) == len) return len;
  return 0;
}

std::string Arg(const CallArgs& a, size_t i, const char* method) {
  if (i >= a.pos.size() || !a.pos[i].is_string()) Raise("TypeError", "{}() argument {} must be str", method, i + 1);
  return a.pos[i].str();
}

std::vector<std::string> Prefixes(const Value& v, const char* method) {
  if (v.is_string()) return {v.str()};
  if (v.is_tuple()) {
    std::vector<std::string> out;
    for (const auto& x : v.list()) {
      if (!x.is_string()) Raise("TypeError", "tuple for {} must only contain str", method);
      out.push_back(x.str());
    }
    return out;
  }
  Raise("TypeError", "{} first arg must be str or a tuple of str, not {}", method, v.TypeName());
}

bool AllChars(const std::string& s, bool (*pred)(unsigned char)) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!pred(c)) return false;
  return true;
}

Value StrMethod(const std::string& s, const std::string& m, CallArgs& a) {
  auto arg_or_none = [&](size_t i) { return i < a.pos.size() ? a.pos[i] : Value::None(); };
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return Value::Str(PyStrip(s, arg_or_none(0), m != "rstrip", m != "lstrip"));
  if (m == "split" || m == "rsplit") {
    auto b = a.Bind(m, {"sep", "maxsplit"}, {Value::None(), Value::Int(-1)});
    if (m == "rsplit" && b[1].int_value() >= 0) RaiseUnsupported("str.rsplit with maxsplit");
    List out;
    for (auto& p : PySplit(s, b[0], b[1].int_value())) out.push_back(Value::Str(std::move(p)));
    return Value::NewList(std::move(out));
  }
  if (m == "splitlines") {
    List out;
    for (auto& p : PySplitLines(s, arg_or_none(0).Truthy())) out.push_back(Value::Str(std::move(p)));
    return Value::NewList(std::move(out));
  }
  if (m == "startswith" || m == "endswith") {
    if (a.pos.empty()) Raise("TypeError", "{}() takes at least 1 argument (0 given)", m);
    if (a.pos.size() > 1) RaiseUnsupported("str.{} with start/end arguments", m);
    for (const auto& p : Prefixes(a.pos[0], m.c_str())) {
      bool hit = p.size() <= s.size() && (m == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (m == "upper") return Value::Str(PyUpper(s));
  if (m == "lower" || m == "casefold") return Value::Str(PyLower(s));
  if (m == "title") return Value::Str(PyTitle(s));
  if (m == "capitalize") return Value::Str(PyCapitalize(s));
  if (m == "swapcase") {
    std::string out = s;
    for (char& c : out) c = std::isupper(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    return Value::Str(out);
  }
  if (m == "replace") {
    auto b = a.Bind(m, {"old", "new", "count"}, {Value::Undefined(), Value::Undefined(), Value::Int(-1)});
    if (!b[0].is_string() || !b[1].is_string()) Raise("TypeError", "replace() arguments must be str");
    return Value::Str(PyReplace(s, b[0].str(), b[1].str(), b[2].int_value()));
  }
  if (m == "format") return Value::Str(PyFormat(s, a));
  if (m == "join") {
    if (a.pos.size() != 1) Raise("TypeError", "join() takes exactly one argument");
    std::string out;
    List items = Iterate(a.pos[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) Raise("TypeError", "sequence item {}: expected str instance, {} found", i, items[i].TypeName());
      if (i) out += s;
      out += items[i].str();
      CheckStringLength(out.size());
    }
    return Value::Str(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    std::string sub = Arg(a, 0, m.c_str());
    if (a.pos.size() > 1) RaiseUnsupported("str.{} with start/end arguments", m);
    if (m == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::Int(n);
    }
    size_t p = (m[0] == 'r') ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (m == "index" || m == "rindex") Raise("ValueError", "substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(CodePointCount(s.substr(0, p))));
  }
  if (m == "isdigit" || m == "isdecimal" || m == "isnumeric") return Value::Bool(AllChars(s, [](unsigned char c) { return c >= '0' && c <= '9'; }));
  if (m == "isalpha") return Value::Bool(AllChars(s, [](unsigned char c) { return std::isalpha(c) != 0 || c >= 0x80; }));
  if (m == "isalnum") return Value::Bool(AllChars(s, [](unsigned char c) { return std::isalnum(c) != 0 || c >= 0x80; }));
  if (m == "isspace") {
    if (s.empty()) return Value::Bool(false);
    for (size_t i = 0; i < s.size();) {
      size_t n = SpaceAt(s, i);
      if (!n) return Value::Bool(false);
      i += n;
    }
    return Value::Bool(true);
  }
  if (m == "isupper" || m == "islower") {
    bool cased = false;
    for (unsigned char c : s) {
      if (std::isupper(c)) {
        if (m == "islower") return Value::Bool(false);
        cased = true;
      } else if (std::islower(c)) {
        if (m == "isupper") return Value::Bool(false);
        cased = true;
      }
    }
    return Value::Bool(cased);
  }
  if (m == "istitle") return Value::Bool(!s.empty() && PyTitle(s) == s);
  if (m == "removeprefix") {
    std::string p = Arg(a, 0, "removeprefix");
    return Value::Str(s.compare(0, p.size(), p) == 0 && p.size() <= s.size() ? s.substr(p.size()) : s);
  }
  if (m == "removesuffix") {
    std::string p = Arg(a, 0, "removesuffix");
    bool hit = !p.empty() && p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
    return Value::Str(hit ? s.substr(0, s.size() - p.size()) : s);
  }
  if (m == "partition" || m == "rpartition") {
    std::string sep = Arg(a, 0, m.c_str());
    if (sep.empty()) Raise("ValueError", "empty separator");
    size_t p = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return m == "partition" ? Value::NewTuple({Value::Str(s), Value::Str(""), Value::Str("")})
                              : Value::NewTuple({Value::Str(""), Value::Str(""), Value::Str(s)});
    return Value::NewTuple({Value::Str(s.substr(0, p)), Value::Str(sep), Value::Str(s.substr(p + sep.size()))});
  }
  if (m == "zfill" || m == "center" || m == "ljust" || m == "rjust") {
    if (a.pos.empty() || !a.pos[0].is_int()) Raise("TypeError", "{}() takes an integer width", m);
    int64_t width = a.pos[0].int_value();
    int64_t len = static_cast<int64_t>(CodePointCount(s));
    if (width <= len) return Value::Str(s);
    CheckStringSize(static_cast<size_t>(width));
    std::string fill = a.pos.size() > 1 && a.pos[1].is_string() ? a.pos[1].str() : (m == "zfill" ? "0" : " ");
    auto rep = [&](int64_t n) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += fill;
      return out;
    };
    int64_t pad = width - len;
    if (m == "ljust") return Value::Str(s + rep(pad));
    if (m == "rjust") return Value::Str(rep(pad) + s);
    if (m == "zfill") {
      if (!s.empty() && (s[0] == '-' || s[0] == '+')) return Value::Str(s.substr(0, 1) + rep(pad) + s.substr(1));
      return Value::Str(rep(pad) + s);
    }
    int64_t left = pad / 2 + (pad & width & 1);
    return Value::Str(rep(left) + s + rep(pad - left));
  }
  RaiseUnsupported("str.{}()", m);
}

Value ListMethod(const Value& obj, const std::string& m, CallArgs& a) {
  const List& l = obj.list();
  if (m == "copy") return Value::NewList(l, obj.is_tuple() ? Value::Flavor::kTuple : Value::Flavor::kPlain);
  if (a.pos.size() != 1) Raise("TypeError", "{}() takes exactly one argument", m);
  int64_t n = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!Equals(l[i], a.pos[0])) continue;
    if (m == "index") return Value::Int(static_cast<int64_t>(i));
    ++n;
  }
  if (m == "index") Raise("ValueError", "{} is not in list", Repr(a.pos[0]));
  return Value::Int(n);
}

Value DictMethod(const Value& obj, const std::string& m, CallArgs& a) {
  if (m == "get") {
    if (a.pos.empty() || a.pos.size() > 2) Raise("TypeError", "get expected 1 or 2 arguments, got {}", a.pos.size());
    if (Value* v = obj.Find(a.pos[0])) return *v;
    return a.pos.size() > 1 ? a.pos[1] : Value::None();
  }
  if (!a.pos.empty() || !a.kw.empty()) Raise("TypeError", "dict.{}() takes no arguments", m);
  if (m == "copy") {
    Value d = Value::NewDict();
    d.dict().items = obj.dict().items;
    return d;
  }
  List out;
  for (const auto& [k, v] : obj.dict().items) {
    if (m == "keys") out.push_back(k);
    else if (m == "values") out.push_back(v);
    else out.push_back(Value::NewTuple({k, v}));
  }
  return Value::NewList(std::move(out));
}

}  // namespace

MethodKind FindMethod(const Value& obj, const std::string& name) {
  if (obj.is_string()) return kStrMethods.count(name) ? MethodKind::kSafe : MethodKind::kNone;
  if (obj.is_list()) {
    if (kListMethods.count(name)) return MethodKind::kSafe;
    if (!obj.is_tuple() && kListUnsafe.count(name)) return MethodKind::kUnsafe;
    return MethodKind::kNone;
  }
  if (obj.is_mapping()) {
    if (kDictMethods.count(name)) return MethodKind::kSafe;
    if (kDictUnsafe.count(name)) return MethodKind::kUnsafe;
  }
  return MethodKind::kNone;
}

Value CallMethod(const Value& obj, const std::string& name, CallArgs& args) {
  if (obj.is_string()) return StrMethod(obj.str(), name, args);
  if (obj.is_list()) return ListMethod(obj, name, args);
  return DictMethod(obj, name, args);
}

std::string PyStrip(const std::string& s, const Value& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (chars.is_none() || chars.is_undefined()) {
    while (left && b < e) {
      size_t n = SpaceAt(s, b);
      if (!n) break;
      b += n;
    }
    while (right && e > b) {
      size_t n = SpaceBefore(s, e);
      if (!n) break;
      e -= n;
    }
    return s.substr(b, e - b);
  }
  if (!chars.is_string()) Raise("TypeError", "strip arg must be None or str");
  std::vector<std::string> set = CodePoints(chars.str());
  auto match_at = [&](size_t i) -> size_t {
    for (const auto& c : set)
      if (s.compare(i, c.size(), c) == 0) return c.size();
    return 0;
  };
  auto match_before = [&](size_t end) -> size_t {
    for (const auto& c : set)
      if (c.size() <= end && s.compare(end - c.size(), c.size(), c) == 0) return c.size();
    return 0;
  };
  while (left && b < e) {
    size_t n = match_at(b);
    if (!n) break;
    b += n;
  }
  while (right && e > b) {
    size_t n = match_before(e);
    if (!n) break;
    e -= n;
  }
  return s.substr(b, e - b);
}

std::vector<std::string> PySplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && SpaceAt(s, i)) i += SpaceAt(s, i);
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::string rest = s.substr(i);
        size_t e = rest.size();
        while (e > 0 && SpaceBefore(rest, e)) e -= SpaceBefore(rest, e);
        out.push_back(rest.substr(0, e));
        break;
      }
      size_t j = i;
      while (j < s.size() && !SpaceAt(s, j)) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) Raise("TypeError", "must be str or None, not {}", sep.TypeName());
  const std::string& d = sep.str();
  if (d.empty()) Raise("ValueError", "empty separator");
  size_t start = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    size_t p = s.find(d, start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + d.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> PySplitLines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') n = 2;
    else if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) n = 1;
    else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) n = 2;
    else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) n = 3;
    if (!n) {
      ++i;
      continue;
    }
    out.push_back(s.substr(start, (keepends ? i + n : i) - start));
    i += n;
    start = i;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

namespace {

// Unicode simple case mapping through glibc's C.UTF-8 locale (ASCII only if it is missing).
std::string MapCase(const std::string& s, bool upper) {
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  static const locale_t c_utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  if (ascii || !c_utf8) {
    std::string out = s;
    for (char& c : out) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    return out;
  }
  std::string out;
  for (const std::string& cp : CodePoints(s)) {
    unsigned char c = static_cast<unsigned char>(cp[0]);
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len != cp.size()) {
      out += cp;  // invalid UTF-8 passes through
      continue;
    }
    uint32_t v = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) v = (v << 6) | (static_cast<unsigned char>(cp[k]) & 0x3F);
    uint32_t m = static_cast<uint32_t>(upper ? towupper_l(static_cast<wint_t>(v), c_utf8) : towlower_l(static_cast<wint_t>(v), c_utf8));
    utf8::AppendCodepoint(out, m);
  }
  return out;
}

}  // namespace

std::string PyUpper(const std::string& s) { return MapCase(s, true); }
std::string PyLower(const std::string& s) { return MapCase(s, false); }
std::string PyTitle(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}
std::string PyCapitalize(const std::string& s) {
  std::vector<std::string> cps = CodePoints(s);
  if (cps.empty()) return s;
  std::string out = PyUpper(cps[0]);
  out += PyLower(s.substr(cps[0].size()));
  return out;
}

std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::vector<std::string> cps = CodePoints(s);
    int64_t n = 0;
    for (const auto& cp : cps) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      out += cp;
      CheckStringLength(out.size());
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t p = s.find(old); p != std::string::npos && (count < 0 || n < count); p = s.find(old, start)) {
    out.append(s, start, p - start);
    out += repl;
    CheckStringLength(out.size());
    start = p + old.size();
    ++n;
  }
  out.append(s, start, std::string::npos);
  return out;
}

}  // namespace ferry::tmpl
