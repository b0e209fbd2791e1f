// DType: every element/block type Ferry stores, with one traits row each.
// Numeric values equal ggml's `ggml_type` so GGUF tensor types map 1:1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  // Ferry's own types: ids above 1000 never collide with ggml's (docs/formats.md).
  kI4G128 = 1001,  // int4 asymmetric, fp16 scale + 4-bit zero per group of 128
};

struct DTypeTraits {
  DType type;
  const char* name;    // "q4_0", as llama.cpp prints it
  int64_t block_size;  // elements per block (1 for plain types)
  size_t block_bytes;  // bytes per block
  bool quantized;
};

// nullopt for ids Ferry does not know (a corrupt or newer file).
std::optional<DTypeTraits> FindDType(uint32_t ggml_id);
const DTypeTraits& Traits(DType t);
inline const char* DTypeName(DType t) { return Traits(t).name; }
// Parses "f16", "q8_0", ... (case-insensitive); nullopt if unknown.
std::optional<DType> DTypeFromName(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers
// that handle untrusted shapes via RowBytesChecked).
inline size_t RowBytes(DType t, int64_t n) {
  const DTypeTraits& tr = Traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}
// nullopt when n is not a multiple of the block size or the size overflows.
std::optional<size_t> RowBytesChecked(DType t, int64_t n);

}  // namespace ferry
