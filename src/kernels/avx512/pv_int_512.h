// Integer P.V for q8_0 / q4_0 V on 512-bit registers (dispatch.h attn_pv_int), shared by the
// avx512 table (vpmaddwd + vpaddd) and the avx512vnni one (vpdpwssd): a template over an Ops
// struct with MaddAcc(acc, a, b) = acc + the int16 pair products of a and b. Only ISA-folder
// .cc files include this, each compiled with its own flags; everything here has internal
// linkage.
//
// Per V block and row the tile's weights become int16 once (RowWeights), then a whole block of
// 32 dims at a time: two keys' 32-byte quants interleaved per 128-bit lane and widened to int16
// pairs (dims 0-7 and 16-23 in one register, 8-15 and 24-31 in the other, put back in order at
// the end), one broadcast pair of weights per row, two multiply-adds per row and key pair. Up
// to 8 rows (a GQA group of one query) share each widened pair. Integer sums are exact, so the
// result is the scalar twin's bit for bit.
#pragma once

// clang-format off
#include "kernels/x86_intrinsics.h"  // first: before anything that includes immintrin.h
// clang-format on
#include <cstdint>
#include <cstring>

#include "kernels/pv_int_frame.h"
#include "kernels/score_q8_256.h"

namespace ferry::kernels::pv512 {
namespace {

using pv_int::kKeys;  // 64 keys: 4 vectors of 16

inline __mmask16 KeyMask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

// pv_int_frame.h's Kernel, rows of up to 8.
template <class Ops>
struct Kernel {
  static constexpr int kMaxRows = 8;
  static float RowWeights(const float* p, int n_keys, const float* dk, int16_t* iw) {
    __m512 w[4];
    __m512 mx = _mm512_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      w[i] = _mm512_mul_ps(_mm512_maskz_loadu_ps(KeyMask(n_keys - 16 * i), p + 16 * i),
                           _mm512_load_ps(dk + 16 * i));
      mx = _mm512_max_ps(mx, _mm512_abs_ps(w[i]));
    }
    bool live;
    const float m = pv_int::RowMax(
        _mm256_max_ps(_mm512_extractf32x8_ps(mx, 0), _mm512_extractf32x8_ps(mx, 1)), iw, &live);
    if (!live) return 0.f;
    const __m512 inv = _mm512_set1_ps(internal::kAttnPvIntLevels / m);
    for (int i = 0; i < 4; ++i)  // |w * inv| <= 32767: the narrowing keeps every value
      _mm256_store_si256(reinterpret_cast<__m256i*>(iw + 16 * i),
                         _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(w[i], inv))));
    return m / internal::kAttnPvIntLevels;
  }
  template <DType T, int NR>
  static void Rows(const int16_t (*iw)[kKeys], const float* s, const uint8_t* const* v, int n_keys,
                   size_t off, int d0, float* const* acc) {
    __m512i a[NR][2];  // int32 lanes: dims 0-7, 16-23 | 8-15, 24-31
    for (int r = 0; r < NR; ++r) a[r][0] = a[r][1] = _mm512_setzero_si512();
    // Keys j, j + 1 (the last key of an odd count pairs with zeros: iw[r][n_keys] is 0).
    for (int j = 0; j < n_keys; j += 2) {
      const __m256i q0 = KeyQuants32<T>(v[j] + off);
      const __m256i q1 = j + 1 < n_keys ? KeyQuants32<T>(v[j + 1] + off) : _mm256_setzero_si256();
      const __m512i lo = _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(q0, q1));
      const __m512i hi = _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(q0, q1));
      pv_int::AddKeyPair<Ops, NR>(a, lo, hi, iw, j);
    }
    const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    for (int r = 0; r < NR; ++r) {
      if (s[r] == 0.f) continue;
      float* o = acc[r] + d0;
      const __m512 vs = _mm512_set1_ps(s[r]);
      const __m512 x0 = _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(a[r][0], first, a[r][1]));
      const __m512 x1 = _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(a[r][0], second, a[r][1]));
      _mm512_storeu_ps(o, _mm512_fmadd_ps(x0, vs, _mm512_loadu_ps(o)));
      _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(x1, vs, _mm512_loadu_ps(o + 16)));
    }
  }
};

}  // namespace
}  // namespace ferry::kernels::pv512
