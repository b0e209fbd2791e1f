// Metadata: typed key/value pairs describing a model, in GGUF's key convention
// ("general.architecture", "llama.block_count", "tokenizer.ggml.tokens", ...).
// Every loader (GGUF, Hugging Face, llama2.c) produces this, so the model and the
// tokenizer are built from one description whatever the file format.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

// A GGUF value. `type` records the stored GGUF type (so a writer can round-trip it).
struct MetaValue {
  enum class Type : uint32_t {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
    kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
  };
  Type type = Type::kI64;
  int64_t i = 0;      // all signed ints and bool
  uint64_t u = 0;     // all unsigned ints (also mirrored into i when it fits)
  double f = 0;       // f32/f64
  std::string s;      // string
  Type elem_type = Type::kI64;  // for arrays
  std::vector<MetaValue> arr;   // for arrays (nested arrays allowed)

  static MetaValue Int(int64_t v, Type t = Type::kI64);
  static MetaValue Uint(uint64_t v, Type t = Type::kU64);
  static MetaValue Float(double v, Type t = Type::kF32);
  static MetaValue Bool(bool v);
  static MetaValue String(std::string v);
  static MetaValue Array(Type elem, std::vector<MetaValue> items);

  bool IsInteger() const;
  bool IsNumber() const;
  // Human-readable, arrays abbreviated (for `ferry info`).
  std::string ToString(size_t max_items = 8) const;
};

class Metadata {
 public:
  void Set(std::string key, MetaValue value);
  bool Has(std::string_view key) const;
  // Removes every key starting with prefix (e.g. "tokenizer." before loading another tokenizer).
  void EraseWithPrefix(std::string_view prefix);
  const MetaValue* Find(std::string_view key) const;

  // Typed getters: nullopt when the key is missing or has an incompatible type.
  std::optional<int64_t> GetInt(std::string_view key) const;   // any integer or bool
  std::optional<double> GetFloat(std::string_view key) const;  // float or integer
  std::optional<bool> GetBool(std::string_view key) const;
  std::optional<std::string> GetString(std::string_view key) const;
  std::optional<std::vector<std::string>> GetStringArray(std::string_view key) const;
  std::optional<std::vector<float>> GetFloatArray(std::string_view key) const;
  std::optional<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Setters for the common cases.
  void SetInt(std::string key, int64_t v) { Set(std::move(key), MetaValue::Int(v, MetaValue::Type::kI32)); }
  void SetUint(std::string key, uint64_t v) { Set(std::move(key), MetaValue::Uint(v, MetaValue::Type::kU32)); }
  void SetFloat(std::string key, double v) { Set(std::move(key), MetaValue::Float(v)); }
  void SetBool(std::string key, bool v) { Set(std::move(key), MetaValue::Bool(v)); }
  void SetString(std::string key, std::string v) { Set(std::move(key), MetaValue::String(std::move(v))); }
  void SetStringArray(std::string key, const std::vector<std::string>& v);
  void SetFloatArray(std::string key, const std::vector<float>& v);
  void SetIntArray(std::string key, const std::vector<int32_t>& v);

  // Insertion order is kept (GGUF writers and `ferry info` print in file order).
  const std::vector<std::pair<std::string, MetaValue>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, MetaValue>> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace ferry
