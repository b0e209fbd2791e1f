// Jinja2's built-in tests (jinja2/tests.py): `x is defined`, `x is string`, `x is in y`, ...
#include <cmath>
#include <set>

#include "template/builtins.h"
#include "template/error.h"

namespace ferry::tmpl {
namespace {

const std::set<std::string> kTests = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string",
    "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "lower", "upper", "eq", "equalto",
    "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
    "divisibleby", "odd", "even", "filter", "test"};

const Value& Arg(const std::string& test, CallArgs& a) {
  if (a.pos.empty()) Raise("TypeError", "test '{}' needs an argument", test);
  return a.pos[0];
}

bool Contains(const Value& seq, const Value& item) {
  switch (seq.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) Raise("TypeError", "'in <string>' requires string as left operand, not {}", item.TypeName());
      return seq.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& x : seq.list())
        if (Equals(x, item)) return true;
      return false;
    case Value::Kind::kDict:
      if (seq.is_mapping()) return seq.Find(item) != nullptr;
      break;
    default: break;
  }
  Raise("TypeError", "argument of type '{}' is not iterable", seq.TypeName());
}

}  // namespace

bool IsKnownTest(const std::string& name) { return kTests.count(name) > 0; }

bool ApplyTest(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_mapping();
  // Undefined defines __iter__ and __len__/__getitem__, so it is iterable and a sequence.
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower") return v.is_string() && ApplyTest("string", v, a) && [&] {
    for (unsigned char c : v.str()) if (std::isupper(c)) return false;
    return true;
  }();
  if (name == "upper") return v.is_string() && [&] {
    for (unsigned char c : v.str()) if (std::islower(c)) return false;
    return true;
  }();
  if (name == "sameas") {
    const Value& o = Arg(name, a);
    if (v.kind() != o.kind()) return false;
    if (v.identity()) return v.identity() == o.identity();
    return Equals(v, o);
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, Arg(name, a));
  if (name == "ne" || name == "!=") return !Equals(v, Arg(name, a));
  if (name == "lt" || name == "lessthan" || name == "<") return Compare(v, Arg(name, a)) < 0;
  if (name == "le" || name == "<=") return Compare(v, Arg(name, a)) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(v, Arg(name, a)) > 0;
  if (name == "ge" || name == ">=") return Compare(v, Arg(name, a)) >= 0;
  if (name == "in") return Contains(Arg(name, a), v);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.is_undefined()) RaiseUndefined(v);
    if (!v.is_number()) Raise("TypeError", "unsupported operand type(s) for %: '{}' and 'int'", v.TypeName());
    if (name != "divisibleby" && v.is_float()) return std::fmod(v.float_value(), 2.0) == (name == "odd" ? 1.0 : 0.0);
    if (name == "odd") return (v.int_value() % 2) != 0;
    if (name == "even") return (v.int_value() % 2) == 0;
    const Value& d = Arg(name, a);
    if (!d.is_number()) Raise("TypeError", "divisibleby needs a number");
    if (d.AsDouble() == 0) Raise("ZeroDivisionError", "integer division or modulo by zero");
    if (v.is_float() || d.is_float()) return std::fmod(v.AsDouble(), d.AsDouble()) == 0;
    if (d.int_value() == -1) return true;
    return v.int_value() % d.int_value() == 0;
  }
  if (name == "filter" || name == "test") {
    if (!v.is_string()) return false;
    return name == "filter" ? IsKnownFilter(v.str()) : IsKnownTest(v.str());
  }
  Raise("TemplateRuntimeError", "No test named '{}' found.", name);
}

}  // namespace ferry::tmpl
