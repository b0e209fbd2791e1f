// Value construction and Python semantics: truthiness, ==, ordering, str() and repr().
#include "template/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/error.h"

namespace ferry::tmpl {

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  v.i_ = b ? 1 : 0;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::Str(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::NewList(List items, Flavor flavor) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->flavor = flavor;
  return v;
}
Value Value::NewDict(Flavor flavor) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<DictData>();
  v.dict_->flavor = flavor;
  return v;
}
Value Value::Function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

const void* Value::identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  if (fn_) return fn_.get();
  return nullptr;
}

Value* Value::Find(const Value& key) const {
  for (auto& [k, v] : dict_->items)
    if (Equals(k, key)) return &v;
  return nullptr;
}
Value* Value::Find(const std::string& key) const {
  for (auto& [k, v] : dict_->items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}
void Value::Set(Value key, Value value) const {
  if (Value* slot = Find(key)) {
    *slot = std::move(value);
    return;
  }
  dict_->items.emplace_back(std::move(key), std::move(value));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_->empty();
    case Kind::kList: return !list_->items.empty();
    case Kind::kDict: return dict_->flavor != Flavor::kPlain || !dict_->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return is_tuple() ? "tuple" : "list";
    case Kind::kDict:
      return dict_->flavor == Flavor::kNamespace ? "Namespace" : dict_->flavor == Flavor::kLoop ? "LoopContext" : "dict";
    case Kind::kCallable: return "function";
  }
  return "object";
}

std::vector<Value> CallArgs::Bind(const std::string& fn, const std::vector<std::string>& names,
                                  std::vector<Value> defaults) const {
  if (pos.size() > names.size())
    Raise("TypeError", "{}() takes at most {} arguments ({} given)", fn, names.size(), pos.size());
  std::vector<Value> out(names.size());
  std::vector<bool> set(names.size(), false);
  for (size_t i = 0; i < pos.size(); ++i) out[i] = pos[i], set[i] = true;
  for (const auto& [k, v] : kw) {
    size_t i = 0;
    while (i < names.size() && names[i] != k) ++i;
    if (i == names.size()) Raise("TypeError", "{}() got an unexpected keyword argument '{}'", fn, k);
    if (set[i]) Raise("TypeError", "{}() got multiple values for argument '{}'", fn, k);
    out[i] = v, set[i] = true;
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (!set[i] && i < defaults.size()) out[i] = defaults[i];
  return out;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple() || a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i)
        if (!Equals(a.list()[i], b.list()[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (!a.is_mapping() || !b.is_mapping()) return a.identity() == b.identity();
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* o = b.Find(k);
        if (!o || !Equals(v, *o)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.AsDouble(), y = b.AsDouble();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined())
    throw TemplateError("UndefinedError", (a.is_undefined() ? a : b).str().empty() ? "value is undefined"
                                                                                    : (a.is_undefined() ? a : b).str());
  Raise("TypeError", "'<' not supported between instances of '{}' and '{}'", a.TypeName(), b.TypeName());
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string digits = sci.substr(0, 1) + (e > 2 ? sci.substr(2, e - 2) : "");
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out.assign("0.");
      out.append(static_cast<size_t>(-exp - 1), '0');
      out.append(digits);
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits;
      out.append(static_cast<size_t>(exp) + 1 - digits.size(), '0');
      out.append(".0");
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1);
      out += '.';
      out.append(digits, static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

std::string ReprString(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

static std::string ReprImpl(const Value& v, bool top, int depth) {
  if (depth > 64) Raise("RecursionError", "maximum recursion depth exceeded while getting the repr of an object");
  switch (v.kind()) {
    case Value::Kind::kUndefined: return top ? "" : "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.bool_value() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.int_value());
    case Value::Kind::kFloat: return FormatFloat(v.float_value());
    case Value::Kind::kString: return top ? v.str() : ReprString(v.str());
    case Value::Kind::kList: {
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += ", ";
        out += ReprImpl(v.list()[i], false, depth + 1);
      }
      if (v.is_tuple() && v.list().size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += ReprImpl(k, false, depth + 1);
        out += ": ";
        out += ReprImpl(x, false, depth + 1);
      }
      out += "}";
      if (v.is_namespace()) {
        out.insert(0, "<Namespace ");
        out += '>';
        return out;
      }
      if (v.dict().flavor == Value::Flavor::kLoop) return "<LoopContext>";
      return out;
    }
    case Value::Kind::kCallable: {
      std::string out = "<function ";
      out += v.callable().name;
      out += '>';
      return out;
    }
  }
  return "";
}

std::string ToStr(const Value& v) { return ReprImpl(v, true, 0); }
std::string Repr(const Value& v) { return ReprImpl(v, false, 0); }

size_t CodePointCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace ferry::tmpl
