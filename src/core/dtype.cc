#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "base/check.h"

namespace ferry {
namespace {

// Sizes follow ggml-common.h: e.g. q4_0 = fp16 scale + 16 bytes of nibbles per 32 weights.
constexpr std::array<DTypeTraits, 25> kTable = {{
    {DType::kF32, "f32", 1, 4, false},
    {DType::kF16, "f16", 1, 2, false},
    {DType::kQ4_0, "q4_0", 32, 18, true},
    {DType::kQ4_1, "q4_1", 32, 20, true},
    {DType::kQ5_0, "q5_0", 32, 22, true},
    {DType::kQ5_1, "q5_1", 32, 24, true},
    {DType::kQ8_0, "q8_0", 32, 34, true},
    {DType::kQ8_1, "q8_1", 32, 36, true},
    {DType::kQ2_K, "q2_k", 256, 84, true},
    {DType::kQ3_K, "q3_k", 256, 110, true},
    {DType::kQ4_K, "q4_k", 256, 144, true},
    {DType::kQ5_K, "q5_k", 256, 176, true},
    {DType::kQ6_K, "q6_k", 256, 210, true},
    {DType::kQ8_K, "q8_k", 256, 292, true},
    {DType::kI8, "i8", 1, 1, false},
    {DType::kI16, "i16", 1, 2, false},
    {DType::kI32, "i32", 1, 4, false},
    {DType::kI64, "i64", 1, 8, false},
    {DType::kF64, "f64", 1, 8, false},
    {DType::kU8, "u8", 1, 1, false},
    {DType::kBF16, "bf16", 1, 2, false},
    {DType::kMXFP4, "mxfp4", 32, 17, true},        // e8m0 exponent byte, 16 B of e2m1 nibbles
    {DType::kI4G128, "int4_g128", 128, 68, true},  // fp16 d, u8 zero, u8 pad, 64 B nibbles
    {DType::kI4G32, "int4_g32", 32, 20, true},     // same layout, 16 B nibbles
    {DType::kI4G64, "int4_g64", 64, 36, true},     // same layout, 32 B nibbles
}};

}  // namespace

std::optional<DTypeTraits> FindDType(uint32_t ggml_id) {
  for (const auto& t : kTable)
    if (static_cast<uint32_t>(t.type) == ggml_id) return t;
  return std::nullopt;
}

const DTypeTraits& Traits(DType t) {
  for (const auto& tr : kTable)
    if (tr.type == t) return tr;
  FERRY_CHECK(false && "unknown DType");
  return kTable[0];
}

std::optional<DType> DTypeFromName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& t : kTable)
    if (lower == t.name) return t.type;
  return std::nullopt;
}

std::optional<size_t> RowBytesChecked(DType t, int64_t n) {
  const DTypeTraits& tr = Traits(t);
  if (IsFerryInt4(t)) {  // ragged last group allowed (dtype.h)
    if (n < 0 || n > (int64_t{1} << 40)) return std::nullopt;
    return FerryInt4RowBytes(tr.block_size, n);
  }
  if (n < 0 || n % tr.block_size != 0) return std::nullopt;
  uint64_t blocks = static_cast<uint64_t>(n / tr.block_size);
  if (blocks > (UINT64_MAX / tr.block_bytes)) return std::nullopt;
  return static_cast<size_t>(blocks * tr.block_bytes);
}

}  // namespace ferry
