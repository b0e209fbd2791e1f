// Integer P.V for q8_0 / q4_0 V on 256-bit registers (dispatch.h attn_pv_int), shared by the
// avx2 table (vpmaddwd + vpaddd) and the avx2vnni one (vpdpwssd): a template over an Ops struct
// with MaddAcc(acc, a, b) = acc + the int16 pair products of a and b. Only ISA-folder .cc files
// include this, each compiled with its own flags; everything here has internal linkage.
//
// Per V block and row the tile's weights become int16 once (RowWeights), then 16 dims at a
// time: two keys' quants interleaved and widened to int16 pairs, one broadcast pair of weights
// per row, two multiply-adds per row and key pair. Up to 4 rows share each widened pair (8
// int32 accumulators). Integer sums are exact, so the result is the scalar twin's bit for bit.
#pragma once

// clang-format off
#include "kernels/x86_intrinsics.h"  // first: before anything that includes immintrin.h
// clang-format on
#include <cstdint>
#include <cstring>

#include "kernels/pv_int_frame.h"

namespace ferry::kernels::pv256 {
namespace {

using pv_int::kKeys;  // 64 keys: 8 vectors of 8

// Lanes [0, n) set, n clamped to 0..8.
inline __m256i KeyMask(int n) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}

// Quants 16h..16h+15 of a V block as signed bytes (q4_0: nibble - 8).
template <DType T>
inline __m128i HalfQuants(const uint8_t* block, int h) {
  if constexpr (T == DType::kQ8_0) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + 16 * h));
  } else {
    static_assert(T == DType::kQ4_0);
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    if (h != 0) x = _mm_srli_epi16(x, 4);
    return _mm_sub_epi8(_mm_and_si128(x, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
  }
}

// pv_int_frame.h's Kernel, rows of up to 4.
template <class Ops>
struct Kernel {
  static constexpr int kMaxRows = 4;
  static float RowWeights(const float* p, int n_keys, const float* dk, int16_t* iw) {
    const __m256 sign = _mm256_set1_ps(-0.f);  // |x| = x without its sign bit
    __m256 w[8];
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 8; ++i) {
      w[i] =
          _mm256_mul_ps(_mm256_maskload_ps(p + 8 * i, KeyMask(n_keys - 8 * i)), _mm256_load_ps(dk + 8 * i));
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, w[i]));
    }
    bool live;
    const float m = pv_int::RowMax(mx, iw, &live);
    if (!live) return 0.f;
    const __m256 inv = _mm256_set1_ps(internal::kAttnPvIntLevels / m);
    for (int i = 0; i < 8; i += 2) {  // |w * inv| <= 32767: packs never saturates
      const __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(w[i], inv));
      const __m256i hi = _mm256_cvtps_epi32(_mm256_mul_ps(w[i + 1], inv));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(iw + 8 * i),
                          _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8));
    }
    return m / internal::kAttnPvIntLevels;
  }
  template <DType T, int NR>
  static void Rows(const int16_t (*iw)[kKeys], const float* s, const uint8_t* const* v, int n_keys,
                   size_t off, int d0, float* const* acc) {
    for (int h = 0; h < 2; ++h) {
      __m256i a[NR][2];  // dims 16h..16h+7, 16h+8..16h+15
      for (int r = 0; r < NR; ++r) a[r][0] = a[r][1] = _mm256_setzero_si256();
      // Keys j, j + 1 (the last key of an odd count pairs with zeros: iw[r][n_keys] is 0).
      for (int j = 0; j < n_keys; j += 2) {
        const __m128i q0 = HalfQuants<T>(v[j] + off, h);
        const __m128i q1 = j + 1 < n_keys ? HalfQuants<T>(v[j + 1] + off, h) : _mm_setzero_si128();
        const __m256i lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(q0, q1));  // (q0[i], q1[i]), i = 0..7
        const __m256i hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(q0, q1));  // i = 8..15
        pv_int::AddKeyPair<Ops, NR>(a, lo, hi, iw, j);
      }
      for (int r = 0; r < NR; ++r) {
        if (s[r] == 0.f) continue;
        float* o = acc[r] + d0 + 16 * h;
        const __m256 vs = _mm256_set1_ps(s[r]);
        _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r][0]), vs, _mm256_loadu_ps(o)));
        _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r][1]), vs, _mm256_loadu_ps(o + 8)));
      }
    }
  }
};

}  // namespace
}  // namespace ferry::kernels::pv256
