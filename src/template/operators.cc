// Binary operators with Python semantics: + - * / // % ** and Jinja's ~ (string concatenation).
#include <cmath>

#include "template/builtins.h"
#include "template/error.h"
#include "template/interpreter.h"

namespace ferry::tmpl {
namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  Raise("TypeError", "unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(), b.TypeName());
}

// Checks the overflow flag of __builtin_*_overflow(x, y, &r), then returns r.
Value CheckedInt(bool overflow, const int64_t& r) {
  if (overflow) RaiseUnsupported("integer overflow (Python integers are unbounded; this renderer uses 64 bits)");
  return Value::Int(r);
}

Value Repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::Str("") : Value::NewList({}, seq.is_tuple() ? Value::Flavor::kTuple : Value::Flavor::kPlain);
  size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
  if (unit == 0) return seq;
  if (unit != 0 && static_cast<uint64_t>(n) > (1ull << 40) / unit) CheckStringSize(SIZE_MAX);
  CheckStringSize(unit * static_cast<size_t>(n));
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::Str(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value::NewList(std::move(out), seq.is_tuple() ? Value::Flavor::kTuple : Value::Flavor::kPlain);
}

double FloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value Interpreter::EvalBinary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = ToStr(a);
    std::string t = ToStr(b);
    CheckStringSize(s.size() + t.size());
    s.append(t);
    return Value::Str(std::move(s));
  }
  if (a.is_undefined()) RaiseUndefined(a);
  if (b.is_undefined()) RaiseUndefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  const int64_t x = a.int_value(), y = b.int_value();
  int64_t r = 0;
  if (op == "+") {
    if (ints) return CheckedInt(__builtin_add_overflow(x, y, &r), r);
    if (nums) return Value::Float(a.AsDouble() + b.AsDouble());
    if (a.is_string() && b.is_string()) {
      CheckStringSize(a.str().size() + b.str().size());
      std::string s = a.str();
      s.append(b.str());
      return Value::Str(std::move(s));
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      CheckStringSize(a.list().size() + b.list().size());
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value::NewList(std::move(l), a.is_tuple() ? Value::Flavor::kTuple : Value::Flavor::kPlain);
    }
    if (a.is_string() || b.is_string())
      Raise("TypeError", "can only concatenate str (not \"{}\") to str", a.is_string() ? b.TypeName() : a.TypeName());
    Unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return CheckedInt(__builtin_sub_overflow(x, y, &r), r);
    if (nums) return Value::Float(a.AsDouble() - b.AsDouble());
    Unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return CheckedInt(__builtin_mul_overflow(x, y, &r), r);
    if (nums) return Value::Float(a.AsDouble() * b.AsDouble());
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) return Repeat(a, y);
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float()) return Repeat(b, x);
    Raise("TypeError", "can't multiply sequence by non-int of type '{}'", (a.is_string() || a.is_list()) ? b.TypeName() : a.TypeName());
  }
  if (op == "/") {
    if (!nums) Unsupported("/", a, b);
    if (b.AsDouble() == 0) Raise("ZeroDivisionError", "division by zero");
    return Value::Float(a.AsDouble() / b.AsDouble());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value::Str(PercentFormat(a.str(), b));
    if (!nums) Unsupported(op, a, b);
    if (b.AsDouble() == 0) throw TemplateError("ZeroDivisionError", op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
    if (ints) {
      if (x == INT64_MIN && y == -1) RaiseUnsupported("integer overflow (Python integers are unbounded; this renderer uses 64 bits)");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::Int(op == "//" ? q : m);
    }
    double fa = a.AsDouble(), fb = b.AsDouble();
    if (op == "%") return Value::Float(FloorMod(fa, fb));
    return Value::Float(std::floor(fa / fb));
  }
  if (op == "**") {
    if (!nums) Unsupported("** or pow()", a, b);
    if (ints && y >= 0) {
      int64_t acc = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(acc, x, &acc)) CheckedInt(true, 0);
        if (acc == 0 || acc == 1) break;
        if (acc == -1) {
          acc = (y % 2 == 0) ? 1 : -1;
          break;
        }
      }
      return Value::Int(acc);
    }
    if (a.AsDouble() == 0 && b.AsDouble() < 0) Raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(a.AsDouble(), b.AsDouble()));
  }
  RaiseUnsupported("operator '{}'", op);
}

}  // namespace ferry::tmpl
