// Attribute and item access, slicing and iteration as the sandboxed Jinja2 environment does them.
#include <algorithm>

#include "template/builtins.h"
#include "template/error.h"
#include "template/methods.h"

namespace ferry::tmpl {
namespace {

thread_local size_t g_max_string_bytes = 64u << 20;
// Bytes of strings a render may build in total (quadratic concatenation loops end here).
thread_local uint64_t g_string_work_left = 64ull * (64u << 20);
constexpr char kSecurityPrefix[] = "SecurityError: ";

std::string ObjName(const Value& obj) {
  if (obj.is_none()) return "None";
  return "'" + obj.TypeName() + " object'";
}

Value NoAttr(const Value& obj, const std::string& name) {
  return Value::Undefined(ObjName(obj) + " has no attribute '" + name + "'");
}

// Python index normalization; false when out of range.
bool NormIndex(int64_t& i, size_t n) {
  if (i < 0) i += static_cast<int64_t>(n);
  return i >= 0 && static_cast<size_t>(i) < n;
}

}  // namespace

void SetMaxStringBytes(size_t n) {
  g_max_string_bytes = n;
  g_string_work_left = 64ull * n;
}
void CheckStringSize(size_t n) {
  if (n > g_string_work_left)
    throw TemplateError("ResourceExhausted", "template builds more than " + std::to_string(64ull * g_max_string_bytes) +
                        " bytes of strings in total", StatusCode::kResourceExhausted);
  g_string_work_left -= n;
  CheckStringLength(n);
}
void CheckStringLength(size_t n) {
  if (n > g_max_string_bytes)
    throw TemplateError("ResourceExhausted", "a template string would exceed " + std::to_string(g_max_string_bytes) + " bytes",
                        StatusCode::kResourceExhausted);
}

void RaiseUndefined(const Value& v) {
  const std::string& hint = v.str();
  if (hint.rfind(kSecurityPrefix, 0) == 0) throw TemplateError("SecurityError", hint.substr(sizeof(kSecurityPrefix) - 1));
  throw TemplateError("UndefinedError", hint.empty() ? "value is undefined" : hint);
}

Value GetAttr(const Value& obj, const std::string& name) {
  MethodKind mk = FindMethod(obj, name);
  if (mk == MethodKind::kUnsafe)
    return Value::Undefined(std::string(kSecurityPrefix) + "access to attribute '" + name + "' of '" + obj.TypeName() +
                            "' object is unsafe.");
  if (mk == MethodKind::kSafe) {
    Value self = obj;
    return Value::Function(obj.TypeName() + "." + name, [self, name](CallArgs& a) { return CallMethod(self, name, a); });
  }
  if (obj.is_dict()) {
    if (Value* v = obj.Find(name)) return *v;
  }
  return NoAttr(obj, name);
}

Value GetItem(const Value& obj, const Value& key) {
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.int_value();
    if (obj.is_list()) {
      if (!NormIndex(i, obj.list().size())) return Value::Undefined(ObjName(obj) + " has no element " + std::to_string(key.int_value()));
      return obj.list()[static_cast<size_t>(i)];
    }
    std::vector<std::string> cps = CodePoints(obj.str());
    if (!NormIndex(i, cps.size())) return Value::Undefined(ObjName(obj) + " has no element " + std::to_string(key.int_value()));
    return Value::Str(cps[static_cast<size_t>(i)]);
  }
  if (obj.is_mapping()) {
    if (Value* v = obj.Find(key)) return *v;
  } else if (obj.is_dict() && key.is_string()) {
    if (Value* v = obj.Find(key.str())) return *v;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(ObjName(obj) + " has no element " + Repr(key));
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto as_int = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) Raise("TypeError", "slice {} must be an integer or None, not {}", what, v.TypeName());
    return v.int_value();
  };
  std::optional<int64_t> a = as_int(start, "indices"), b = as_int(stop, "indices"), c = as_int(step, "indices");
  int64_t st = c.value_or(1);
  if (st == 0) Raise("ValueError", "slice step cannot be zero");
  if (!obj.is_list() && !obj.is_string()) Raise("TypeError", "'{}' object is not subscriptable", obj.TypeName());
  std::vector<std::string> cps;
  size_t n;
  if (obj.is_string()) {
    cps = CodePoints(obj.str());
    n = cps.size();
  } else {
    n = obj.list().size();
  }
  const int64_t len = static_cast<int64_t>(n);
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += len;
    if (st > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  int64_t lo = clamp(a, st > 0 ? 0 : len - 1), hi = clamp(b, st > 0 ? len : -1);
  std::vector<size_t> idx;
  if (st > 0) {
    for (int64_t i = lo; i < hi; i = (st > hi - i) ? hi : i + st) idx.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = lo; i > hi; i = (st < hi - i) ? hi : i + st) idx.push_back(static_cast<size_t>(i));
  }
  if (obj.is_string()) {
    std::string out;
    for (size_t i : idx) out += cps[i];
    return Value::Str(std::move(out));
  }
  List out;
  for (size_t i : idx) out.push_back(obj.list()[i]);
  return Value::NewList(std::move(out), obj.is_tuple() ? Value::Flavor::kTuple : Value::Flavor::kPlain);
}

List Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.list();
    case Value::Kind::kString: {
      List out;
      for (auto& cp : CodePoints(v.str())) out.push_back(Value::Str(std::move(cp)));
      return out;
    }
    case Value::Kind::kDict:
      if (v.is_mapping()) {
        List out;
        for (const auto& [k, x] : v.dict().items) out.push_back(k);
        return out;
      }
      break;
    default: break;
  }
  Raise("TypeError", "'{}' object is not iterable", v.TypeName());
}

}  // namespace ferry::tmpl
