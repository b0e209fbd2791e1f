// The frame of the integer P.V kernels (dispatch.h attn_pv_int): the walk over V blocks and
// row blocks, and a block's fp16 scales gathered from the tile's V rows (AVX + F16C, which every
// table that includes this has). avx2/pv_int_256.h and avx512/pv_int_512.h supply the rows'
// arithmetic. Only ISA-folder .cc files include this (through those headers); everything here
// has internal linkage.
#pragma once

// clang-format off
#include "kernels/x86_intrinsics.h"  // first: before anything that includes immintrin.h
// clang-format on
#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kv_row.h"

namespace ferry::kernels::pv_int {
namespace {

constexpr int kKeys = internal::kAttnPvIntMaxKeys;

// dk[j]: key j's scale of the block at byte offset off (j < n_keys), 0 above: [kKeys].
inline void BlockScales(const uint8_t* const* v, int n_keys, size_t off, float* dk) {
  alignas(16) uint16_t h[kKeys] = {};  // [key] the scales' fp16 bits
  for (int j = 0; j < n_keys; ++j) std::memcpy(&h[j], v[j] + off, 2);
  for (int i = 0; i < kKeys; i += 8)
    _mm256_storeu_ps(dk + i, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h + i))));
}

// The largest of mx's lanes (a row's largest weight magnitude m); when below
// kAttnPvIntMinWeight the row adds nothing to the block: *live is false and iw [kKeys] zeros.
inline float RowMax(__m256 mx, int16_t* iw, bool* live) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float m = _mm_cvtss_f32(m4);
  *live = m >= internal::kAttnPvIntMinWeight;
  if (!*live) std::memset(iw, 0, kKeys * sizeof(int16_t));
  return m;
}

// One key pair (j, j + 1) into NR rows: a[r][0] += lo x (iw[r][j], iw[r][j + 1]) and a[r][1]
// += hi x the same, by Ops::MaddAcc (V: the Ops' int32 vector).
template <class Ops, int NR, class V>
inline void AddKeyPair(V (*a)[2], V lo, V hi, const int16_t (*iw)[kKeys], int j) {
  for (int r = 0; r < NR; ++r) {
    int32_t wp;
    std::memcpy(&wp, &iw[r][j], 4);
    const V b = Ops::Broadcast(wp);
    a[r][0] = Ops::MaddAcc(a[r][0], lo, b);
    a[r][1] = Ops::MaddAcc(a[r][1], hi, b);
  }
}

// dispatch.h attn_pv_int: per V block and block of NR (1..Kernel::kMaxRows) rows,
//  - Kernel::RowWeights(p, n_keys, dk, iw) rounds one row's weights of the block to int16,
//    iw[j] = rint(p[j] * dk[j] * 32767 / m) (0 from n_keys on), and returns m / 32767, or 0
//    when m < kAttnPvIntMinWeight (the row adds nothing for this block);
//  - Kernel::Rows<T, NR>(iw, s, v, n_keys, off, d0, acc) adds the block (byte offset off in
//    each V row) to dims d0..d0+31 of the rows' accumulators.
template <class Kernel, DType T>
void AttnPvInt(const float* p, int ld_p, int n_rows, const uint8_t* const* v, int n_keys, int head_dim,
               float* const* acc) {
  alignas(64) float dk[kKeys];  // [key] scales of the current block
  for (int b = 0; b < head_dim / 32; ++b) {
    const size_t off = b * kKvBlockBytes<T>;
    BlockScales(v, n_keys, off, dk);
    ForRowBlocks<Kernel::kMaxRows>(n_rows, [&](auto nr, int r) {
      constexpr int kRows = decltype(nr)::value;
      alignas(64) int16_t iw[kRows][kKeys];  // [row][key] weights, key pairs read as int32
      float s[kRows];                        // [row] their scales
      for (int i = 0; i < kRows; ++i)
        s[i] = Kernel::RowWeights(p + static_cast<int64_t>(r + i) * ld_p, n_keys, dk, iw[i]);
      Kernel::template Rows<T, kRows>(iw, s, v, n_keys, off, 32 * b, acc + r);
    });
  }
}

}  // namespace
}  // namespace ferry::kernels::pv_int
