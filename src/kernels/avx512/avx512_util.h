// Small AVX-512 helpers for the files in kernels/avx512/ and kernels/avx512vnni/ (only included
// by them: ISA flags). Internal linkage: the avx512vnni TUs compile these with VNNI enabled, and
// an inline function with external linkage could then reach the avx512 table through the linker.
#pragma once

#include "kernels/x86_intrinsics.h"

#include <type_traits>

namespace ferry::kernels::avx512 {
namespace {

// GCC 12's 512-to-256 casts and extractf64x4 (so _mm512_reduce_add_ps too) trip
// -Wuninitialized inside its own headers; the DQ extracts below do not.
inline __m256 LoHalf(__m512 v) {
  return _mm512_extractf32x8_ps(v, 0);
}
inline __m256 HiHalf(__m512 v) {
  return _mm512_extractf32x8_ps(v, 1);
}
inline __m256i LoHalf(__m512i v) {
  return _mm512_extracti32x8_epi32(v, 0);
}
inline __m256i HiHalf(__m512i v) {
  return _mm512_extracti32x8_epi32(v, 1);
}

// Horizontal sums in a fixed order: halves, then quarters, then pairs.
inline float HsumF32x8(__m256 h) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}
inline int32_t HsumI32x8(__m256i a) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1))));
}
inline float HsumF32x16(__m512 v) {
  return HsumF32x8(_mm256_add_ps(LoHalf(v), HiHalf(v)));
}

// Attention scores of NR rows x up to 16 keys in lanes: s[r * ld_s + j] = acc[r][j] * scale, j < nk.
template <int NR>
inline void StoreScores16(const __m512* acc, int nk, float scale, float* s, int ld_s) {
  const __mmask16 m = static_cast<__mmask16>((1u << nk) - 1);
  for (int r = 0; r < NR; ++r)
    _mm512_mask_storeu_ps(s + static_cast<int64_t>(r) * ld_s, m,
                          _mm512_mul_ps(acc[r], _mm512_set1_ps(scale)));
}

// Calls f(std::integral_constant<int, NT>{}) with NT = nt (1..8; more counts as 8): the
// runtime token count of a tile becomes the template one its registers are sized by.
template <typename F>
inline void WithTokens8(int nt, F&& f) {
  switch (nt) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    case 6:
      return f(std::integral_constant<int, 6>{});
    case 7:
      return f(std::integral_constant<int, 7>{});
    default:
      return f(std::integral_constant<int, 8>{});
  }
}

}  // namespace
}  // namespace ferry::kernels::avx512
