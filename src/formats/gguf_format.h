// GGUF on-disk constants shared by the reader and the writer (ggml docs/gguf.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/metadata.h"

namespace ferry::formats::gguf {

inline constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kDefaultAlignment = 32;
// ggml's GGML_MAX_DIMS.
inline constexpr uint32_t kMaxDims = 4;
// Arrays of arrays are legal but nothing real nests deeply; a cap keeps recursion bounded.
inline constexpr int kMaxArrayDepth = 8;
inline constexpr const char* kAlignmentKey = "general.alignment";

// Bytes of a scalar value type; 0 for string/array (variable size) or unknown ids.
inline size_t ScalarSize(uint32_t type) {
  switch (static_cast<MetaValue::Type>(type)) {
    case MetaValue::Type::kU8:
    case MetaValue::Type::kI8:
    case MetaValue::Type::kBool:
      return 1;
    case MetaValue::Type::kU16:
    case MetaValue::Type::kI16:
      return 2;
    case MetaValue::Type::kU32:
    case MetaValue::Type::kI32:
    case MetaValue::Type::kF32:
      return 4;
    case MetaValue::Type::kU64:
    case MetaValue::Type::kI64:
    case MetaValue::Type::kF64:
      return 8;
    default:
      return 0;
  }
}

inline bool IsKnownValueType(uint32_t type) {
  return type <= 12;
}

// The fewest bytes one value of `type` can occupy (used to bound counts before allocating).
inline size_t MinValueSize(uint32_t type) {
  if (type == static_cast<uint32_t>(MetaValue::Type::kString)) return 8;  // length
  if (type == static_cast<uint32_t>(MetaValue::Type::kArray)) return 12;  // elem type + count
  return ScalarSize(type);
}

inline const char* ValueTypeName(uint32_t type) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  return type <= 12 ? kNames[type] : "unknown";
}

}  // namespace ferry::formats::gguf
