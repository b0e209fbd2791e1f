// q8_0 / q4_0 K scores on 256-bit integer registers (the avx2, avx2vnni and avx512 tables;
// only included by the ISA folders): up to 4 query rows x 4 keys, the query in
// PrepareAttnQuery's q8_0 form. Per block of 32: each (row, key)'s exact int32 dot by the sign
// trick (|k| x sign(q, k) in vpmaddubsw, whose pair sums stay below 2 x 128 x 127 < 2^15, then
// vpmaddwd; q4_0 keys as nibble - 8),
// the 4 keys' lane sums by a fixed tree of integer adds (exact), then acc = fma(float(isum),
// dk * dq, acc): dispatch.h's q8_0 arithmetic, bit for bit the scalar twin's.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {
namespace {  // internal linkage: each ISA's files compile their own copy with their own flags

// Lane sums of 4 int32x8 vectors -> [sum a, sum b, sum c, sum d] (integer adds: exact).
inline __m128i Hsum4I32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

// 8 partial int32 sums of the 32 products k[i] * q[i] (k, q: signed bytes; q is never -128, the
// query quantizer's |q| <= 127, so sign(q, k) cannot overflow).
inline __m256i DotI8x32(__m256i k, __m256i q) {
  const __m256i prod16 = _mm256_maddubs_epi16(_mm256_sign_epi8(k, k), _mm256_sign_epi8(q, k));
  return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
}

// The 32 quants of a q8_0 / q4_0 block as signed bytes in element order (q4_0: elements 0..15
// the low nibbles, 16..31 the high ones, each - 8).
template <DType T>
inline __m256i KeyQuants32(const uint8_t* block) {
  if constexpr (T == DType::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else {
    static_assert(T == DType::kQ4_0);
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m128i lo = _mm_and_si128(x, _mm_set1_epi8(0x0F)),
                  hi = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(0x0F));
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
}

// NR (1..4) rows x 4 keys (k: 4 key rows; unused ones repeat a valid row and are dropped).
template <DType T, int NR>
void ScoresQ8Block(const void* const* q, const uint8_t* const* k, int nk, int nb, float scale, float* s,
                   int ld_s) {
  __m128 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const int64_t off = int64_t{b} * static_cast<int64_t>(kKvBlockBytes<T>),
                  q_off = int64_t{b} * sizeof(block_q8_0);
    __m256i kq[4];
    uint16_t dh[4];
    for (int j = 0; j < 4; ++j) {
      kq[j] = KeyQuants32<T>(k[j] + off);
      std::memcpy(&dh[j], k[j] + off, 2);
    }
    const __m128 dk =
        _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, static_cast<int16_t>(dh[3]), static_cast<int16_t>(dh[2]),
                                   static_cast<int16_t>(dh[1]), static_cast<int16_t>(dh[0])));
    for (int r = 0; r < NR; ++r) {
      const auto* qr = static_cast<const uint8_t*>(q[r]);
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qr + q_off + 2));
      const __m128i isum =
          Hsum4I32(DotI8x32(kq[0], qv), DotI8x32(kq[1], qv), DotI8x32(kq[2], qv), DotI8x32(kq[3], qv));
      const float dq = internal::ActScales(q[r], nb, sizeof(block_q8_0))[b];
      acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dk, _mm_set1_ps(dq)), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    alignas(16) float out[4];
    _mm_store_ps(out, _mm_mul_ps(acc[r], _mm_set1_ps(scale)));
    for (int j = 0; j < 4; ++j)
      if (j < nk) s[static_cast<int64_t>(r) * ld_s + j] = out[j];
  }
}

// attn_scores for q8_0 / q4_0 K by 4-key blocks, rows in blocks of up to 4.
template <DType T>
void ScoresQ8ByKeyQuads(const void* const* q, int n_rows, const uint8_t* k, int64_t k_stride, int n_keys,
                        int head_dim, float scale, float* s, int ld_s) {
  ForKeyQuads(k, k_stride, n_keys, [=](int j0, int nk, const std::array<const uint8_t*, 4>& kr) {
    ForRowBlocks<4>(n_rows, [=](auto nr, int r) {
      ScoresQ8Block<T, decltype(nr)::value>(q + r, kr.data(), nk, head_dim / 32, scale,
                                            s + static_cast<int64_t>(r) * ld_s + j0, ld_s);
    });
  });
}

}  // namespace
}  // namespace ferry::kernels
