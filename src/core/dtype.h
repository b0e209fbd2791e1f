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
  kMXFP4 = 39,  // OCP microscaling fp4: e2m1 values, an e8m0 scale per 32 (gpt-oss experts)
  // Ferry's own types: ids above 1000 never collide with ggml's (docs/formats.md).
  kI4G128 = 1001,  // int4 asymmetric, fp16 scale + 4-bit zero per group of 128
  kI4G32 = 1003,   // the same per group of 32
  kI4G64 = 1004,   // the same per group of 64
  kU8 = 1005,      // raw bytes (safetensors U8: gpt-oss's MXFP4 blocks and scales before import)
};

// Ferry's int4 family (int4_g32/g64/g128): rows need not be whole groups. A row of n elements
// is floor(n/G) full groups plus, when G does not divide n, one ragged last group of r = n mod G
// elements stored as 4 + ceil(r/32)*16 bytes (its quants past r are the zero point, i.e. 0.0).
// See docs/formats.md section 8.1.
inline bool IsFerryInt4(DType t) { return t == DType::kI4G128 || t == DType::kI4G32 || t == DType::kI4G64; }
inline int64_t FerryInt4Group(DType t) { return t == DType::kI4G32 ? 32 : t == DType::kI4G64 ? 64 : 128; }
inline size_t FerryInt4RowBytes(int64_t group, int64_t n) {
  const int64_t full = n / group, rest = n % group;
  return static_cast<size_t>(full) * static_cast<size_t>(4 + group / 2) +
         (rest > 0 ? static_cast<size_t>(4 + (rest + 31) / 32 * 16) : 0);
}

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

// Bytes of a row of n elements; n must be a multiple of the block size (Ferry int4: any n) (checked by callers
// that handle untrusted shapes via RowBytesChecked).
inline size_t RowBytes(DType t, int64_t n) {
  if (IsFerryInt4(t)) return FerryInt4RowBytes(FerryInt4Group(t), n);
  const DTypeTraits& tr = Traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}
// nullopt when n is not a multiple of the block size or the size overflows.
std::optional<size_t> RowBytesChecked(DType t, int64_t n);

}  // namespace ferry
