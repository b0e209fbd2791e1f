// JSON bridge and a json.dumps twin (separators, indent, sort_keys, ensure_ascii, float repr).
#include "template/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/error.h"

namespace ferry::tmpl {

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& x : j) items.push_back(FromJson(x));
      return Value::NewList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::NewDict();
      for (const auto& [k, v] : j.items()) d.Set(k, FromJson(v));
      return d;
    }
    default: return Value::None();
  }
}

namespace {

void DumpString(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buf[16];
    if (c < 0x20) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
    } else {
      // Decode one UTF-8 sequence; invalid bytes are emitted as U+FFFD.
      uint32_t cp = 0xFFFD;
      size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (len > 1 && i + len <= s.size()) {
        cp = c & (0xFF >> (len + 1));
        for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        i += len - 1;
      }
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out += buf;
    }
  }
  out += '"';
}

std::string KeyString(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.str();
    case Value::Kind::kNone: return "null";
    case Value::Kind::kBool: return k.bool_value() ? "true" : "false";
    case Value::Kind::kInt: return std::to_string(k.int_value());
    case Value::Kind::kFloat: return FormatFloat(k.float_value());
    default: Raise("TypeError", "keys must be str, int, float, bool or None, not {}", k.TypeName());
  }
}

void Dump(const Value& v, const DumpOptions& o, int level, std::string& out) {
  if (level > 64) Raise("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.bool_value() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.int_value()); return;
    case Value::Kind::kFloat: {
      double d = v.float_value();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : FormatFloat(d);
      return;
    }
    case Value::Kind::kString: DumpString(v.str(), o.ensure_ascii, out); return;
    case Value::Kind::kList: {
      if (v.list().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += o.item_sep;
        if (o.has_indent) newline(level + 1);
        Dump(v.list()[i], o, level + 1, out);
      }
      if (o.has_indent) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (!v.is_mapping()) break;
      if (v.dict().items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, x] : v.dict().items) items.emplace_back(KeyString(k), &x);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_sep;
        if (o.has_indent) newline(level + 1);
        DumpString(items[i].first, o.ensure_ascii, out);
        out += o.key_sep;
        Dump(*items[i].second, o, level + 1, out);
      }
      if (o.has_indent) newline(level);
      out += '}';
      return;
    }
    default: break;
  }
  Raise("TypeError", "Object of type {} is not JSON serializable", v.TypeName());
}

}  // namespace

std::string DumpJson(const Value& v, const DumpOptions& options) {
  std::string out;
  Dump(v, options, 0, out);
  return out;
}

}  // namespace ferry::tmpl
