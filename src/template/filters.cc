// Jinja2's built-in filters (jinja2/filters.py) plus transformers' tojson.
#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "template/builtins.h"
#include "template/error.h"
#include "template/json.h"
#include "template/methods.h"

namespace ferry::tmpl {
namespace {

const std::set<std::string> kNotImplemented = {"filesizeformat", "groupby",   "pprint",   "random",
                                               "slice",          "striptags", "truncate", "urlencode",
                                               "urlize",         "wordwrap",  "xmlattr"};

int64_t ToInt64(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18)
    RaiseUnsupported("float too large to convert to a 64-bit integer");
  return static_cast<int64_t>(d);
}

// environment.getattr over a dotted path ("a.b", "0"), as make_attrgetter does.
Value AttrPath(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return GetItem(item, attribute);
  Value cur = item;
  std::string path = ToStr(attribute);
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_undefined()) RaiseUndefined(cur);
    cur = numeric && part.size() < 18 ? GetItem(cur, Value::Int(std::atoll(part.c_str())))
                                      : GetItem(cur, Value::Str(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// The sort key Jinja uses: lowercased strings unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::Str(PyLower(v.str()));
  return v;
}

bool Less(const Value& a, const Value& b) {
  return Compare(a, b) < 0;
}

List SortedBy(List items, const Value& attribute, bool case_sensitive, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& it : items)
    keyed.emplace_back(SortKey(attribute.is_none() ? it : AttrPath(it, attribute), case_sensitive), it);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(y.first, x.first) : Less(x.first, y.first);
  });
  List out;
  for (auto& [k, v] : keyed) out.push_back(v);
  return out;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string JinjaTitle(const std::string& s) {
  // Split at runs of [-\s({[<]; uppercase each piece's first char, lowercase the rest.
  auto is_delim = [](char c) {
    return c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
           c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  bool start = true;
  for (char c : s) {
    if (is_delim(c)) {
      out += c;
      start = true;
    } else {
      out += static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
      start = false;
    }
  }
  return out;
}

Value Indent(const Value& value, CallArgs& a) {
  auto b =
      a.Bind("indent", {"width", "first", "blank"}, {Value::Int(4), Value::Bool(false), Value::Bool(false)});
  std::string ind;
  if (b[0].is_string()) {
    ind = b[0].str();
  } else {
    int64_t w = b[0].int_value();
    CheckStringSize(static_cast<size_t>(std::max<int64_t>(w, 0)));
    ind = std::string(static_cast<size_t>(std::max<int64_t>(w, 0)), ' ');
  }
  std::string s = ToStr(value) + "\n";
  std::vector<std::string> lines = PySplitLines(s, false);
  std::string rv;
  if (b[2].Truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : std::string()) + lines[i];
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
      CheckStringLength(rv.size());
    }
  }
  if (b[1].Truthy()) rv.insert(0, ind);
  return Value::Str(std::move(rv));
}

Value ToJsonFilter(const Value& value, CallArgs& a) {
  auto b = a.Bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"},
                  {Value::Bool(false), Value::None(), Value::None(), Value::Bool(false)});
  DumpOptions o;
  o.ensure_ascii = b[0].Truthy();
  if (!b[1].is_none()) {
    o.has_indent = true;
    o.item_sep = ",";
    if (b[1].is_string()) {
      o.indent = b[1].str();
    } else if (b[1].is_int()) {
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(b[1].int_value(), 0, 1024)), ' ');
    } else {
      Raise("TypeError", "indent must be an int or a str");
    }
  }
  if (!b[2].is_none()) {
    if (!b[2].is_list() || b[2].list().size() != 2 || !b[2].list()[0].is_string() ||
        !b[2].list()[1].is_string())
      Raise("ValueError", "separators must be a (item_separator, key_separator) pair of str");
    o.item_sep = b[2].list()[0].str();
    o.key_sep = b[2].list()[1].str();
  }
  o.sort_keys = b[3].Truthy();
  std::string s = DumpJson(value, o);
  CheckStringSize(s.size());
  return Value::Str(std::move(s));
}

// select/reject/selectattr/rejectattr.
Value SelectOrReject(const std::string& name, const Value& value, CallArgs& a) {
  bool with_attr = name == "selectattr" || name == "rejectattr";
  bool select = name == "select" || name == "selectattr";
  size_t off = 0;
  Value attr;
  if (with_attr) {
    if (a.pos.empty()) Raise("TypeError", "{}() missing the attribute argument", name);
    attr = a.pos[0];
    off = 1;
  }
  std::string test;
  CallArgs targs;
  if (a.pos.size() > off) {
    if (!a.pos[off].is_string()) Raise("TypeError", "test name must be a string");
    test = a.pos[off].str();
    targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), a.pos.end());
    targs.kw = a.kw;
  }
  List out;
  if (!value.Truthy()) return Value::NewList();  // jinja2 guards with `if value:`
  for (const Value& it : Iterate(value)) {
    Value x = with_attr ? AttrPath(it, attr) : it;
    bool ok = test.empty() ? x.Truthy() : ApplyTest(test, x, targs);
    if (ok == select) out.push_back(it);
  }
  return Value::NewList(std::move(out));
}

Value MapFilter(const Value& value, CallArgs& a) {
  List out;
  if (!value.Truthy()) return Value::NewList();  // jinja2 guards with `if value:`
  for (const auto& [k, v] : a.kw)
    if (k == "attribute") {
      Value def = Value::Undefined();
      for (const auto& [k2, v2] : a.kw)
        if (k2 == "default") def = v2;
      for (const Value& it : Iterate(value)) {
        Value x = AttrPath(it, v);
        out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
      }
      return Value::NewList(std::move(out));
    }
  if (a.pos.empty() || !a.pos[0].is_string()) Raise("TypeError", "map() needs a filter name or attribute=");
  std::string filter = a.pos[0].str();
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (const Value& it : Iterate(value)) {
    CallArgs copy = fargs;
    out.push_back(ApplyFilter(filter, it, copy));
  }
  return Value::NewList(std::move(out));
}

Value MinMax(bool is_max, const Value& value, CallArgs& a) {
  auto b =
      a.Bind(is_max ? "max" : "min", {"case_sensitive", "attribute"}, {Value::Bool(false), Value::None()});
  List items = Iterate(value);
  if (items.empty()) return Value::Undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value best_key = SortKey(b[1].is_none() ? items[0] : AttrPath(items[0], b[1]), b[0].Truthy());
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = SortKey(b[1].is_none() ? items[i] : AttrPath(items[i], b[1]), b[0].Truthy());
    if (is_max ? Less(best_key, k) : Less(k, best_key)) best = i, best_key = k;
  }
  return items[best];
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.str()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      if (v.is_mapping()) return static_cast<int64_t>(v.dict().items.size());
      break;
    default:
      break;
  }
  Raise("TypeError", "object of type '{}' has no len()", v.TypeName());
}

Value IntFilter(const Value& value, CallArgs& a) {
  auto b = a.Bind("int", {"default", "base"}, {Value::Int(0), Value::Int(10)});
  if (value.is_int() || value.is_bool()) return Value::Int(value.int_value());
  if (value.is_float()) return Value::Int(ToInt64(value.float_value()));
  if (value.is_string()) {
    std::string s = PyStrip(value.str(), Value::None(), true, true);
    std::string digits;
    for (char c : s)
      if (c != '_') digits += c;
    if (b[1].int_value() == 10 && !digits.empty()) {
      size_t i = (digits[0] == '-' || digits[0] == '+') ? 1 : 0;
      bool ok = i < digits.size() && digits.size() < 19;
      for (size_t k = i; k < digits.size(); ++k)
        ok = ok && std::isdigit(static_cast<unsigned char>(digits[k]));
      if (ok) return Value::Int(std::atoll(digits.c_str()));
    } else if (b[1].int_value() != 10) {
      RaiseUnsupported("int filter with base {}", b[1].int_value());
    }
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    bool hex = s.find_first_of("xXpP") != std::string::npos;  // strtod reads hex floats; Python does not
    if (!s.empty() && !hex && end == s.c_str() + s.size() && std::isfinite(d)) return Value::Int(ToInt64(d));
  }
  return b[0];
}

Value FloatFilter(const Value& value, CallArgs& a) {
  auto b = a.Bind("float", {"default"}, {Value::Float(0.0)});
  if (value.is_number()) return Value::Float(value.AsDouble());
  if (value.is_string()) {
    std::string s = PyStrip(value.str(), Value::None(), true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    bool hex = s.find_first_of("xXpP") != std::string::npos;
    if (!s.empty() && !hex && end == s.c_str() + s.size()) return Value::Float(d);
  }
  return b[0];
}

// One function per filter (aliases share one); `name` is the name it was called by.
using FilterFn = Value (*)(const std::string& name, const Value& value, CallArgs& a);

Value FilterDefault(const std::string& name, const Value& value, CallArgs& a) {
  auto b = a.Bind(name, {"default_value", "boolean"}, {Value::Str(""), Value::Bool(false)});
  if (value.is_undefined() || (b[1].Truthy() && !value.Truthy())) return b[0];
  return value;
}

Value FilterLength(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Int(Length(value));
}

Value FilterTojson(const std::string& /*name*/, const Value& value, CallArgs& a) {
  return ToJsonFilter(value, a);
}

Value FilterTrim(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("trim", {"chars"}, {Value::None()});
  return Value::Str(PyStrip(ToStr(value), b[0], true, true));
}

Value FilterString(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Str(ToStr(value));
}

Value FilterSafe(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return value.is_string() ? value : Value::Str(ToStr(value));
}

Value FilterUpper(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Str(PyUpper(ToStr(value)));
}

Value FilterLower(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Str(PyLower(ToStr(value)));
}

Value FilterCapitalize(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Str(PyCapitalize(ToStr(value)));
}

Value FilterTitle(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Str(JinjaTitle(ToStr(value)));
}

Value FilterEscape(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::Str(HtmlEscape(ToStr(value)));
}

Value FilterIndent(const std::string& /*name*/, const Value& value, CallArgs& a) {
  return Indent(value, a);
}

Value FilterReplace(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b =
      a.Bind("replace", {"old", "new", "count"}, {Value::Undefined(), Value::Undefined(), Value::None()});
  return Value::Str(
      PyReplace(ToStr(value), ToStr(b[0]), ToStr(b[1]), b[2].is_none() ? -1 : b[2].int_value()));
}

Value FilterJoin(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("join", {"d", "attribute"}, {Value::Str(""), Value::None()});
  std::string sep = ToStr(b[0]), out;
  bool first = true;
  for (const Value& it : Iterate(value)) {
    if (!first) out += sep;
    first = false;
    out += ToStr(b[1].is_none() ? it : AttrPath(it, b[1]));
    CheckStringLength(out.size());
  }
  return Value::Str(std::move(out));
}

Value FilterList(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  return Value::NewList(Iterate(value));
}

Value FilterFirstLast(const std::string& name, const Value& value, CallArgs& /*a*/) {
  List items = Iterate(value);
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return name == "first" ? items.front() : items.back();
}

Value FilterItems(const std::string& /*name*/, const Value& value, CallArgs& a) {
  if (value.is_undefined()) return Value::NewList();
  if (!value.is_mapping()) Raise("TypeError", "Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, v] : value.dict().items) out.push_back(Value::NewTuple({k, v}));
  return Value::NewList(std::move(out));
}

Value FilterDictsort(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("dictsort", {"case_sensitive", "by", "reverse"},
                  {Value::Bool(false), Value::Str("key"), Value::Bool(false)});
  if (!value.is_mapping()) Raise("TypeError", "dictsort needs a mapping");
  size_t pos = ToStr(b[1]) == "value" ? 1 : 0;
  List pairs;
  for (const auto& [k, v] : value.dict().items) pairs.push_back(Value::NewTuple({k, v}));
  return Value::NewList(SortedBy(pairs, Value::Int(static_cast<int64_t>(pos)), b[0].Truthy(), b[2].Truthy()));
}

Value FilterSort(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("sort", {"reverse", "case_sensitive", "attribute"},
                  {Value::Bool(false), Value::Bool(false), Value::None()});
  return Value::NewList(SortedBy(Iterate(value), b[2], b[1].Truthy(), b[0].Truthy()));
}

Value FilterUnique(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("unique", {"case_sensitive", "attribute"}, {Value::Bool(false), Value::None()});
  List out, seen;
  for (const Value& it : Iterate(value)) {
    Value k = SortKey(b[1].is_none() ? it : AttrPath(it, b[1]), b[0].Truthy());
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, k); })) {
      seen.push_back(k);
      out.push_back(it);
    }
  }
  return Value::NewList(std::move(out));
}

Value FilterReverse(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  if (value.is_string()) {
    std::vector<std::string> cps = CodePoints(value.str());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value::Str(out);
  }
  List items = Iterate(value);
  std::reverse(items.begin(), items.end());
  return Value::NewList(std::move(items));
}

Value FilterMap(const std::string& /*name*/, const Value& value, CallArgs& a) {
  return MapFilter(value, a);
}

Value FilterSelect(const std::string& name, const Value& value, CallArgs& a) {
  return SelectOrReject(name, value, a);
}

Value FilterInt(const std::string& /*name*/, const Value& value, CallArgs& a) {
  return IntFilter(value, a);
}

Value FilterFloat(const std::string& /*name*/, const Value& value, CallArgs& a) {
  return FloatFilter(value, a);
}

Value FilterAbs(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  if (value.is_float()) return Value::Float(std::fabs(value.float_value()));
  if (value.is_int() || value.is_bool()) {
    if (value.int_value() == INT64_MIN) RaiseUnsupported("integer overflow");
    return Value::Int(value.int_value() < 0 ? -value.int_value() : value.int_value());
  }
  Raise("TypeError", "bad operand type for abs(): '{}'", value.TypeName());
}

Value FilterRound(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("round", {"precision", "method"}, {Value::Int(0), Value::Str("common")});
  if (!value.is_number()) Raise("TypeError", "type {} doesn't define __round__ method", value.TypeName());
  double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(b[0].int_value(), -300, 300)));
  double x = value.AsDouble() * scale;
  std::string method = ToStr(b[1]);
  double r = method == "common"  ? std::nearbyint(x)
             : method == "ceil"  ? std::ceil(x)
             : method == "floor" ? std::floor(x)
                                 : NAN;
  if (std::isnan(r) && !std::isnan(x)) Raise("FilterArgumentError", "method must be common, ceil or floor");
  if (value.is_int() && method == "common") return value;
  return Value::Float(r / scale);
}

Value FilterSum(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("sum", {"attribute", "start"}, {Value::None(), Value::Int(0)});
  Value acc = b[1];
  for (const Value& it : Iterate(value)) {
    Value x = b[0].is_none() ? it : AttrPath(it, b[0]);
    if (!acc.is_number() || !x.is_number())
      Raise("TypeError", "unsupported operand type(s) for +: '{}' and '{}'", acc.TypeName(), x.TypeName());
    if (acc.is_float() || x.is_float()) {
      acc = Value::Float(acc.AsDouble() + x.AsDouble());
    } else {
      int64_t r;
      if (__builtin_add_overflow(acc.int_value(), x.int_value(), &r)) RaiseUnsupported("integer overflow");
      acc = Value::Int(r);
    }
  }
  return acc;
}

Value FilterMinMax(const std::string& name, const Value& value, CallArgs& a) {
  return MinMax(name == "max", value, a);
}

Value FilterCenter(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("center", {"width"}, {Value::Int(80)});
  CallArgs ca;
  ca.pos.push_back(b[0]);
  return CallMethod(Value::Str(ToStr(value)), "center", ca);
}

Value FilterWordcount(const std::string& /*name*/, const Value& value, CallArgs& /*a*/) {
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : ToStr(value)) {
    bool w = std::isalnum(c) || c == '_' || c >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

Value FilterAttr(const std::string& /*name*/, const Value& value, CallArgs& a) {
  if (a.pos.size() != 1) Raise("TypeError", "attr() takes exactly one argument");
  std::string n = ToStr(a.pos[0]);
  if (value.is_mapping()) {
    Value v = GetAttr(value, n);
    // Plain getattr: dict keys are not attributes.
    return v.is_callable() || (v.is_undefined() && !v.str().empty() && v.str()[0] == 'S')
               ? v
               : Value::Undefined("'dict object' has no attribute '" + n + "'");
  }
  return GetAttr(value, n);
}

Value FilterFormat(const std::string& /*name*/, const Value& value, CallArgs& a) {
  if (!a.kw.empty()) RaiseUnsupported("format filter with keyword arguments");
  return Value::Str(PercentFormat(ToStr(value), Value::NewTuple(a.pos)));
}

Value FilterBatch(const std::string& /*name*/, const Value& value, CallArgs& a) {
  auto b = a.Bind("batch", {"linecount", "fill_with"}, {Value::Undefined(), Value::None()});
  if (!b[0].is_int() || b[0].int_value() <= 0)
    Raise("ValueError", "batch linecount must be a positive integer");
  size_t n = static_cast<size_t>(b[0].int_value());
  List out, cur;
  for (const Value& it : Iterate(value)) {
    cur.push_back(it);
    if (cur.size() == n) out.push_back(Value::NewList(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (!b[1].is_none())
      while (cur.size() < n) cur.push_back(b[1]);
    out.push_back(Value::NewList(std::move(cur)));
  }
  return Value::NewList(std::move(out));
}

const std::unordered_map<std::string, FilterFn>& Filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"default", FilterDefault},
      {"d", FilterDefault},
      {"length", FilterLength},
      {"count", FilterLength},
      {"tojson", FilterTojson},
      {"trim", FilterTrim},
      {"string", FilterString},
      {"safe", FilterSafe},
      {"upper", FilterUpper},
      {"lower", FilterLower},
      {"capitalize", FilterCapitalize},
      {"title", FilterTitle},
      {"escape", FilterEscape},
      {"e", FilterEscape},
      {"forceescape", FilterEscape},
      {"indent", FilterIndent},
      {"replace", FilterReplace},
      {"join", FilterJoin},
      {"list", FilterList},
      {"first", FilterFirstLast},
      {"last", FilterFirstLast},
      {"items", FilterItems},
      {"dictsort", FilterDictsort},
      {"sort", FilterSort},
      {"unique", FilterUnique},
      {"reverse", FilterReverse},
      {"map", FilterMap},
      {"select", FilterSelect},
      {"reject", FilterSelect},
      {"selectattr", FilterSelect},
      {"rejectattr", FilterSelect},
      {"int", FilterInt},
      {"float", FilterFloat},
      {"abs", FilterAbs},
      {"round", FilterRound},
      {"sum", FilterSum},
      {"min", FilterMinMax},
      {"max", FilterMinMax},
      {"center", FilterCenter},
      {"wordcount", FilterWordcount},
      {"attr", FilterAttr},
      {"format", FilterFormat},
      {"batch", FilterBatch},
  };
  return table;
}

}  // namespace

bool IsKnownFilter(const std::string& name) {
  return Filters().count(name) || kNotImplemented.count(name);
}

Value ApplyFilter(const std::string& name, const Value& value, CallArgs& a) {
  auto it = Filters().find(name);
  if (it != Filters().end()) return it->second(name, value, a);
  if (kNotImplemented.count(name)) RaiseUnsupported("filter '{}' is not implemented by this renderer", name);
  Raise("TemplateRuntimeError", "No filter named '{}' found.", name);
}

}  // namespace ferry::tmpl
