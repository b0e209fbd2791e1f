// KV cache row formats the attention kernels read in place: one head's row of head_dim values
// per token, stored as f32, f16, bf16, q8_0 or q4_0 (blocks of 32 along head_dim, ggml's
// block layouts). KvValue is the scalar definition of a stored value, the one every SIMD
// kernel reproduces bit for bit before its multiply-adds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels {

// The types a KV cache may store.
inline constexpr DType kKvTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0};
inline bool IsKvType(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 || t == DType::kQ4_0;
}
// Whether a head row of head_dim values fits type t (q8_0/q4_0: whole blocks of 32).
inline bool KvTypeFits(DType t, int head_dim) {
  return IsKvType(t) && head_dim > 0 && head_dim % static_cast<int>(Traits(t).block_size) == 0;
}
// Bytes of one head row.
inline size_t KvRowBytes(DType t, int head_dim) {
  return RowBytes(t, head_dim);
}
// Where a cache's V slots start in their own buffer, for K slots of key_slot_bytes: half a K
// slot, in whole cache lines, so a key's K and V rows never sit at the same offset within their
// slots when both buffers are aligned alike (KvStorage's are once past 2 MiB: AlignedBuffer's
// huge-page alignment; smaller caches stay in cache, where the offset was never measured to
// matter). Why: on Zen 4 that coincidence
// made tinyllama-1.1b's f16 cache (4 KV heads of 128-byte rows, 512-byte slots) decode attention
// at depth 4096 in 11.6 ms a token with 2 threads against 6.8-7.0 ms with V 128-320 bytes further
// on (mod 512), while the other shapes and types measured were unchanged by the offset
// (docs/benchmarks.md, "V rows half a slot after K").
inline size_t KvValueLead(size_t key_slot_bytes) {
  return (key_slot_bytes / 2 + 63) / 64 * 64;
}

// Bytes of one q8_0 / q4_0 block, a compile-time constant for the kernels' offsets (RowBytes(T,
// 32) is the same number through a table lookup and a division).
template <DType T>
inline constexpr size_t kKvBlockBytes = T == DType::kQ8_0 ? sizeof(block_q8_0) : sizeof(block_q4_0);

// Quant i of a q8_0 / q4_0 block (its fp16 scale first) as a signed int: q8_0 the int8, q4_0
// the nibble - 8 (elements 0..15 the low nibbles, 16..31 the high ones).
template <DType T>
inline int KvQuantInt(const uint8_t* block, int i) {
  if constexpr (T == DType::kQ8_0) {
    return static_cast<int8_t>(block[2 + i]);
  } else {
    static_assert(T == DType::kQ4_0);
    return (i < 16 ? block[2 + i] & 0x0F : block[2 + i - 16] >> 4) - 8;
  }
}

// Value d of a head row of type T: exactly what the SIMD kernels compute before multiplying
// (q8_0: d * q, q4_0: d * (q - 8), one float product each).
template <DType T>
inline float KvValue(const uint8_t* row, int d) {
  if constexpr (T == DType::kF32) {
    float v;
    std::memcpy(&v, row + 4 * d, 4);
    return v;
  } else if constexpr (T == DType::kF16 || T == DType::kBF16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * d, 2);
    return T == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
  } else if constexpr (T == DType::kQ8_0) {
    const uint8_t* b = row + (d / 32) * sizeof(block_q8_0);
    uint16_t h;
    std::memcpy(&h, b, 2);
    return Fp16ToFp32(h) * static_cast<float>(KvQuantInt<T>(b, d % 32));
  } else {
    static_assert(T == DType::kQ4_0);
    const uint8_t* b = row + (d / 32) * sizeof(block_q4_0);
    uint16_t h;
    std::memcpy(&h, b, 2);
    return Fp16ToFp32(h) * static_cast<float>(KvQuantInt<T>(b, d % 32));
  }
}

// Register blocking of the attention micro-kernels: calls f(std::integral_constant<int, NR>{}, r)
// for rows [r, r + NR) covering [0, n): blocks of kMax rows, then one block of the 1..kMax-1
// left. Callers pass lambdas capturing by value (kernels/avx2/avx2_util.h WithTokens: that keeps
// GCC's accumulators in registers).
template <int kMax, typename F>
inline void ForRowBlocks(int n, F&& f) {
  int r = 0;
  for (; r + kMax <= n; r += kMax) f(std::integral_constant<int, kMax>{}, r);
  const int left = n - r;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((left == I + 1 ? f(std::integral_constant<int, I + 1>{}, r) : void()), ...);
  }
  (std::make_integer_sequence<int, kMax - 1>{});
}

// The keys of an attn_scores call in quads: f(j0, nk, kr) with kr the rows of keys j0..j0+nk-1
// (nk in 1..4; unused entries repeat key j0 and their results are dropped). kr is an array, not
// a pointer, so that callers' lambdas capture the rows by value (with a pointer the avx2 scores
// ran 2-3% slower).
template <typename F>
inline void ForKeyQuads(const uint8_t* k, int64_t k_stride, int n_keys, F&& f) {
  for (int j0 = 0; j0 < n_keys; j0 += 4) {
    const int nk = n_keys - j0 < 4 ? n_keys - j0 : 4;
    std::array<const uint8_t*, 4> kr;
    for (int j = 0; j < 4; ++j) kr[j] = k + (j0 + (j < nk ? j : 0)) * k_stride;
    f(j0, nk, kr);
  }
}

// Calls f(std::integral_constant<DType, T>{}) for the runtime KV type t (IsKvType(t)).
template <typename F>
inline void WithKvType(DType t, F&& f) {
  switch (t) {
    case DType::kF16:
      f(std::integral_constant<DType, DType::kF16>{});
      break;
    case DType::kBF16:
      f(std::integral_constant<DType, DType::kBF16>{});
      break;
    case DType::kQ8_0:
      f(std::integral_constant<DType, DType::kQ8_0>{});
      break;
    case DType::kQ4_0:
      f(std::integral_constant<DType, DType::kQ4_0>{});
      break;
    default:
      f(std::integral_constant<DType, DType::kF32>{});
      break;
  }
}

}  // namespace ferry::kernels
