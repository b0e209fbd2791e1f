// 256-bit K-quant dots (q4_K, q5_K, q6_K x q8_K) shared by the avx2 and avx2vnni tables: the
// kernel bodies are templates over Ops, whose MaddAcc(acc, a, b) adds the int16 pair products
// a * b into int32 lanes (avx2: vpmaddwd + vpaddd; AVX-VNNI: one vpdpwssd). Both compute the
// same exact integers and run the same float operations, so the two tables give the same bits.
// Only the ISA folders include this file; everything here has internal linkage, so each table's
// copy stays compiled with its own flags. (avx2_util.h's inline helpers are plain AVX2.)
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/avx2/avx2_util.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels::avx2 {
namespace {

// Shuffle masks selecting scale pair k (int16 lanes) of a q4_K/q5_K block: 2*k and 2*k+1 as a
// broadcast of bytes (2k, 2k+1) across the register.
inline __m256i ScaleShuffleK4(int k) {
  const char lo = static_cast<char>(2 * k), hi = static_cast<char>(2 * k + 1);
  return _mm256_set_epi8(hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi,
                         lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo);
}

// Mins contribution: returns int32 lanes min[j] * (bsum[2j] + bsum[2j+1]) (4 lanes of pairs).
inline __m128i MinsTimesBsums(__m256i mins_and_scales, const int16_t* bsums) {
  const __m256i q8sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
  const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
  return _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
}

// q4_K / q5_K against NT q8_K rows: the weight side of a block (scale unpacking, nibble masks,
// q5_K's fifth bit) is done once for all NT tokens. Each token runs exactly the instruction
// sequence of NT = 1, so the one-token dot and the tile give the same bits for a token
// whatever its tile. Per int32 lane and block: at most 8 pair products of |3968 * 63| (q5_K
// pairs 2 * 31 * 128, 6-bit scales): no overflow.
template <typename Ops, int NT, typename Block>
void DotK4Rows(const void* w, const void* const* x, int64_t n, float* out) {
  constexpr bool kQ5 = std::is_same_v<Block, block_q5_K>;  // q5_K: a fifth bit from qh
  const auto* a = static_cast<const Block*>(w);
  const block_q8_K* b[NT];
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const block_q8_K*>(x[t]);
  const __m256i m4 = _mm256_set1_epi8(0xF);
  float acc[NT] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float wd = _cvtsh_ss(a[i].d), wdmin = _cvtsh_ss(a[i].dmin);
    uint32_t utmp[4];
    UnpackK4Scales(a[i].scales, utmp);
    const __m256i mins_and_scales =
        _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(utmp[3]), static_cast<int>(utmp[2]),
                                           static_cast<int>(utmp[1]), static_cast<int>(utmp[0])));
    int32_t mins[NT];  // M = sum_j m_j * (bsum 2j + bsum 2j+1), exact
    for (int t = 0; t < NT; ++t) mins[t] = HsumI32x4(MinsTimesBsums(mins_and_scales, b[t][i].bsums));
    const __m128i sc128 = _mm256_castsi256_si128(mins_and_scales);
    const __m256i scales = _mm256_inserti128_si256(_mm256_castsi128_si256(sc128), sc128, 1);
    const uint8_t* q4 = a[i].qs;
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kQ5) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qh));
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i scale_l = _mm256_shuffle_epi8(scales, ScaleShuffleK4(2 * j));
      const __m256i scale_h = _mm256_shuffle_epi8(scales, ScaleShuffleK4(2 * j + 1));
      const __m256i q4bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 32 * j));
      __m256i q4l = _mm256_and_si256(q4bits, m4);
      __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
      if constexpr (kQ5) {  // bit 2j of qh goes with the low nibbles, bit 2j + 1 with the high
        const auto high = [&](int bit) {
          const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << bit));
          return _mm256_slli_epi16(_mm256_srli_epi16(_mm256_and_si256(hbits, mask), bit), 4);
        };
        q4l = _mm256_add_epi8(q4l, high(2 * j));
        q4h = _mm256_add_epi8(q4h, high(2 * j + 1));
      }
      for (int t = 0; t < NT; ++t) {
        const int8_t* q8 = b[t][i].qs + 64 * j;
        const __m256i q8l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
        const __m256i q8h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32));
        sumi[t] = Ops::MaddAcc(sumi[t], scale_l, _mm256_maddubs_epi16(q4l, q8l));
        sumi[t] = Ops::MaddAcc(sumi[t], scale_h, _mm256_maddubs_epi16(q4h, q8h));
        if constexpr (NT > 1) KeepInRegister(sumi[t]);  // NT = 1 fits without it
      }
    }
    for (int t = 0; t < NT; ++t) {  // the canonical chain of ref::PackedTile (packed q4_K)
      acc[t] = std::fma(b[t][i].d * wd, static_cast<float>(HsumI32x8(sumi[t])), acc[t]);
      acc[t] = std::fma(-(b[t][i].d * wdmin), static_cast<float>(mins[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// q6_K against NT q8_K rows, the weight side (bit planes, scales) once for all of them; the
// same per-token sequence as NT = 1 (see DotK4Rows). int16 pairs: |(q - 32) * x| sums of two
// stay within 2 * 32 * 128; per int32 lane at most 16 of them times |scale| <= 128. Per
// super-block the exact S = sum_j sc_j * sum (q - 32) x, then acc = fma(d * d_x, S, acc).
template <typename Ops, int NT>
void DotQ6_KRows(const void* w, const void* const* x, int64_t n, float* out) {
  const auto* a = static_cast<const block_q6_K*>(w);
  const block_q8_K* bk[NT];
  for (int t = 0; t < NT; ++t) bk[t] = static_cast<const block_q8_K*>(x[t]);
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m256i m32s = _mm256_set1_epi8(32);
  float acc[NT] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float wd = _cvtsh_ss(a[i].d);
    const uint8_t* q4 = a[i].ql;
    const uint8_t* qh = a[i].qh;
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * j));
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4);
      const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4);
      const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4);
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 64 * j));
      const __m256i b2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 64 * j + 32));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(b1, m4), h0),
          _mm256_or_si256(_mm256_and_si256(b2, m4), h1),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), h2),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), h3),
      };
      for (int k = 0; k < 4; ++k) {
        // Scales of groups 8j+2k and 8j+2k+1, each broadcast over 8 int16 lanes.
        const int g = 8 * j + 2 * k;
        const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(a[i].scales[g])),
                                             _mm_set1_epi16(static_cast<int16_t>(a[i].scales[g + 1])));
        for (int t = 0; t < NT; ++t) {
          const __m256i q8v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bk[t][i].qs + 128 * j + 32 * k));
          const __m256i p16 =
              _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], q8v), _mm256_maddubs_epi16(m32s, q8v));
          sumi[t] = Ops::MaddAcc(sumi[t], sc, p16);
          if constexpr (NT > 1) KeepInRegister(sumi[t]);  // NT = 1 fits without it
        }
      }
    }
    for (int t = 0; t < NT; ++t)  // the exact S, then the canonical chain of ref::PackedTile (packed q6_K)
      acc[t] = std::fma(bk[t][i].d * wd, static_cast<float>(HsumI32x8(sumi[t])), acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// The table entries (dispatch.h DotFn / DotTileFn) of one Ops.
template <typename Ops>
struct KQuantDots256 {
  static float Q4_K(const void* w, const void* x, int64_t n) {
    float out;
    DotK4Rows<Ops, 1, block_q4_K>(w, &x, n, &out);
    return out;
  }
  static float Q5_K(const void* w, const void* x, int64_t n) {
    float out;
    DotK4Rows<Ops, 1, block_q5_K>(w, &x, n, &out);
    return out;
  }
  static float Q6_K(const void* w, const void* x, int64_t n) {
    float out;
    DotQ6_KRows<Ops, 1>(w, &x, n, &out);
    return out;
  }
  // nt may exceed the 4 tokens WithTokens instantiates: the tile is run in slices of 4.
  static void TileQ4_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
    for (int t0 = 0; t0 < nt; t0 += 4)
      WithTokens(nt - t0,
                 [=](auto k) { DotK4Rows<Ops, decltype(k)::value, block_q4_K>(w, x + t0, n, out + t0); });
  }
  static void TileQ5_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
    for (int t0 = 0; t0 < nt; t0 += 4)
      WithTokens(nt - t0,
                 [=](auto k) { DotK4Rows<Ops, decltype(k)::value, block_q5_K>(w, x + t0, n, out + t0); });
  }
  static void TileQ6_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
    for (int t0 = 0; t0 < nt; t0 += 4)
      WithTokens(nt - t0, [=](auto k) { DotQ6_KRows<Ops, decltype(k)::value>(w, x + t0, n, out + t0); });
  }
};

}  // namespace
}  // namespace ferry::kernels::avx2
