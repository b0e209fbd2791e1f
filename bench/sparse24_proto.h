// Prototype (issue 9 item 6, not in the product): a 2:4 compressed f16 weight format and its
// GEMV, to measure whether a Wanda 2:4-pruned model decodes faster than with its dense f16
// weights. Format per row of n_in inputs (n_in % 16 == 0): the 2 kept values of every group
// of 4 as f16 [n_in / 2], and one index byte per group (kept positions i0 < i1 as i0 | i1 << 2)
// [n_in / 4]: 1.25 bytes per weight instead of 2. Results: docs/sparsity.md "Item 6".
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"

namespace ferry::proto {

struct Sparse24F16 {
  int64_t n_out = 0, n_in = 0;
  std::vector<uint16_t> values;  // [n_out, n_in / 2] f16 kept values, in input order
  std::vector<uint8_t> index;    // [n_out, n_in / 4] kept positions per group of 4
};

// w: [n_out, n_in] f32 with at most 2 non-zeros in every group of 4 (a 2:4-pruned matrix);
// groups with fewer keep zeros at the lowest free positions.
inline Sparse24F16 Pack24(const std::vector<float>& w, int64_t n_out, int64_t n_in) {
  Sparse24F16 s{n_out, n_in, {}, {}};
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t g = 0; g < n_in / 4; ++g) {
      const float* q = w.data() + o * n_in + g * 4;
      int kept[2], k = 0;
      for (int i = 0; i < 4 && k < 2; ++i)
        if (q[i] != 0.f) kept[k++] = i;
      for (int i = 0; i < 4 && k < 2; ++i)  // pad with zero-valued positions
        if (q[i] == 0.f && (k == 0 || i != kept[0])) kept[k++] = i;
      if (kept[0] > kept[1]) std::swap(kept[0], kept[1]);
      s.values.push_back(Fp32ToFp16(q[kept[0]]));
      s.values.push_back(Fp32ToFp16(q[kept[1]]));
      s.index.push_back(static_cast<uint8_t>(kept[0] | (kept[1] << 2)));
    }
  return s;
}

// Scalar reference: y[o] = sum over kept (i, v) of v * x[i], in input order.
inline void MatVec24Ref(const Sparse24F16& s, int64_t o0, int64_t o1, const float* x, float* y) {
  for (int64_t o = o0; o < o1; ++o) {
    const uint16_t* v = s.values.data() + o * (s.n_in / 2);
    const uint8_t* ix = s.index.data() + o * (s.n_in / 4);
    float acc = 0.f;
    for (int64_t g = 0; g < s.n_in / 4; ++g) {
      acc += Fp16ToFp32(v[2 * g]) * x[g * 4 + (ix[g] & 3)];
      acc += Fp16ToFp32(v[2 * g + 1]) * x[g * 4 + (ix[g] >> 2)];
    }
    y[o] = acc;
  }
}

// AVX2: per 16 inputs (4 groups, 8 kept values) the index bytes become 8 lane positions; two
// permutes of the 16 inputs and a blend line them up with the 8 converted values.
__attribute__((target("avx2,fma,f16c"))) inline void MatVec24Avx2(const Sparse24F16& s, int64_t o0,
                                                                  int64_t o1, const float* x, float* y) {
  static const uint16_t* lut = [] {  // index byte -> i0 | i1 << 8
    static uint16_t t[256];
    for (int b = 0; b < 256; ++b) t[b] = static_cast<uint16_t>((b & 3) | ((b >> 2 & 3) << 8));
    return t;
  }();
  const __m256i lane_base = _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4);
  for (int64_t o = o0; o < o1; ++o) {
    const uint16_t* v = s.values.data() + o * (s.n_in / 2);
    const uint8_t* ix = s.index.data() + o * (s.n_in / 4);
    // Two accumulators over alternating chunks hide the FMA latency (the sum order is fixed).
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t c = 0; c < s.n_in / 16; ++c) {
      const uint8_t* b = ix + c * 4;
      const uint64_t pos = uint64_t{lut[b[0]]} | uint64_t{lut[b[1]]} << 16 | uint64_t{lut[b[2]]} << 32 |
                           uint64_t{lut[b[3]]} << 48;
      const __m256i p =
          _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(pos))), lane_base);
      const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + c * 16), p);
      const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + c * 16 + 8), p);
      const __m256 xs = _mm256_blend_ps(lo, hi, 0xF0);
      const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + c * 8)));
      acc[c & 1] = _mm256_fmadd_ps(w, xs, acc[c & 1]);
    }
    const __m256 sum = _mm256_add_ps(acc[0], acc[1]);
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    r = _mm_hadd_ps(r, r);
    r = _mm_hadd_ps(r, r);
    y[o] = _mm_cvtss_f32(r);
  }
}

}  // namespace ferry::proto
