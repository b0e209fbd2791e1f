#include "core/metadata.h"

#include <fmt/format.h>

namespace ferry {

MetaValue MetaValue::Int(int64_t v, Type t) {
  MetaValue m;
  m.type = t;
  m.i = v;
  m.u = static_cast<uint64_t>(v);
  return m;
}
MetaValue MetaValue::Uint(uint64_t v, Type t) {
  MetaValue m;
  m.type = t;
  m.u = v;
  m.i = static_cast<int64_t>(v);
  return m;
}
MetaValue MetaValue::Float(double v, Type t) {
  MetaValue m;
  m.type = t;
  m.f = v;
  return m;
}
MetaValue MetaValue::Bool(bool v) {
  MetaValue m;
  m.type = Type::kBool;
  m.i = v ? 1 : 0;
  m.u = m.i;
  return m;
}
MetaValue MetaValue::String(std::string v) {
  MetaValue m;
  m.type = Type::kString;
  m.s = std::move(v);
  return m;
}
MetaValue MetaValue::Array(Type elem, std::vector<MetaValue> items) {
  MetaValue m;
  m.type = Type::kArray;
  m.elem_type = elem;
  m.arr = std::move(items);
  return m;
}

bool MetaValue::IsInteger() const {
  switch (type) {
    case Type::kU8: case Type::kI8: case Type::kU16: case Type::kI16: case Type::kU32:
    case Type::kI32: case Type::kU64: case Type::kI64: case Type::kBool:
      return true;
    default:
      return false;
  }
}
bool MetaValue::IsNumber() const { return IsInteger() || type == Type::kF32 || type == Type::kF64; }

std::string MetaValue::ToString(size_t max_items) const {
  switch (type) {
    case Type::kBool: return i ? "true" : "false";
    case Type::kU8: case Type::kU16: case Type::kU32: case Type::kU64: return fmt::format("{}", u);
    case Type::kI8: case Type::kI16: case Type::kI32: case Type::kI64: return fmt::format("{}", i);
    case Type::kF32: case Type::kF64: return fmt::format("{}", f);
    case Type::kString: return s.size() > 60 ? fmt::format("\"{}...\" ({} bytes)", s.substr(0, 60), s.size()) : "\"" + s + "\"";
    case Type::kArray: {
      std::string out = "[";
      for (size_t k = 0; k < arr.size() && k < max_items; ++k) {
        if (k) out += ", ";
        out += arr[k].ToString(max_items);
      }
      if (arr.size() > max_items) out += fmt::format(", ... ({} items)", arr.size());
      return out + "]";
    }
  }
  return "?";
}

void Metadata::Set(std::string key, MetaValue value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

void Metadata::EraseWithPrefix(std::string_view prefix) {
  std::vector<std::pair<std::string, MetaValue>> kept;
  for (auto& e : entries_)
    if (e.first.compare(0, prefix.size(), prefix) != 0) kept.push_back(std::move(e));
  entries_ = std::move(kept);
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
}

bool Metadata::Has(std::string_view key) const { return index_.find(key) != index_.end(); }

const MetaValue* Metadata::Find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

std::optional<int64_t> Metadata::GetInt(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || !v->IsInteger()) return std::nullopt;
  return v->i;
}
std::optional<double> Metadata::GetFloat(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || !v->IsNumber()) return std::nullopt;
  return v->IsInteger() ? static_cast<double>(v->i) : v->f;
}
std::optional<bool> Metadata::GetBool(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || !v->IsInteger()) return std::nullopt;
  return v->i != 0;
}
std::optional<std::string> Metadata::GetString(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || v->type != MetaValue::Type::kString) return std::nullopt;
  return v->s;
}
std::optional<std::vector<std::string>> Metadata::GetStringArray(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || v->type != MetaValue::Type::kArray) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) {
    if (e.type != MetaValue::Type::kString) return std::nullopt;
    out.push_back(e.s);
  }
  return out;
}
std::optional<std::vector<float>> Metadata::GetFloatArray(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || v->type != MetaValue::Type::kArray) return std::nullopt;
  std::vector<float> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) {
    if (!e.IsNumber()) return std::nullopt;
    out.push_back(static_cast<float>(e.IsInteger() ? static_cast<double>(e.i) : e.f));
  }
  return out;
}
std::optional<std::vector<int64_t>> Metadata::GetIntArray(std::string_view key) const {
  const MetaValue* v = Find(key);
  if (!v || v->type != MetaValue::Type::kArray) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) {
    if (!e.IsInteger()) return std::nullopt;
    out.push_back(e.i);
  }
  return out;
}

void Metadata::SetStringArray(std::string key, const std::vector<std::string>& v) {
  std::vector<MetaValue> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(MetaValue::String(s));
  Set(std::move(key), MetaValue::Array(MetaValue::Type::kString, std::move(items)));
}
void Metadata::SetFloatArray(std::string key, const std::vector<float>& v) {
  std::vector<MetaValue> items;
  items.reserve(v.size());
  for (float f : v) items.push_back(MetaValue::Float(f));
  Set(std::move(key), MetaValue::Array(MetaValue::Type::kF32, std::move(items)));
}
void Metadata::SetIntArray(std::string key, const std::vector<int32_t>& v) {
  std::vector<MetaValue> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(MetaValue::Int(x, MetaValue::Type::kI32));
  Set(std::move(key), MetaValue::Array(MetaValue::Type::kI32, std::move(items)));
}

}  // namespace ferry
