// 512-bit K-quant dots (q4_K, q5_K, q6_K x q8_K) shared by the avx512 and avx512vnni tables:
// templates over Ops, whose MaddAcc(acc, a, b) adds the int16 pair products a * b into int32
// lanes (avx512: vpmaddwd + vpaddd; AVX512-VNNI: one vpdpwssd). Same integers and the same
// float operations on both, so the two tables give the same bits.
//
// One zmm covers two 32-element sub-blocks: a q4_K chunk of 32 bytes is broadcast to both
// halves, the low half keeps the low nibbles and the high half the high ones, which matches
// the activation's 64 contiguous bytes; vpermw spreads the two sub-blocks' scales over their
// halves. q6_K subtracts its offset 32 through the activation block sums (bsums): exact.
// Only the ISA folders include this file; everything in it has internal linkage.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/avx512/avx512_util.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels::avx512 {
namespace {

inline __m512i LoadZ(const void* p) {
  return _mm512_loadu_si512(p);
}
inline __m256i LoadY(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
// 32 bytes into both halves of a zmm.
inline __m512i Broadcast32(const void* p) {
  return _mm512_broadcast_i64x4(LoadY(p));
}
// int16 lane indices for vpermw: lanes [0, 16) = lo, [16, 32) = hi.
inline __m512i HalvesIdx(int lo, int hi) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(lo)),
                                 _mm512_set1_epi16(static_cast<int16_t>(hi)));
}
// int16 lane indices g, g+1, g+2, g+3, each over 8 lanes (q6_K's 16-element groups).
inline __m512i QuartersIdx(int g) {
  return _mm512_set_epi16(g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 2, g + 2, g + 2, g + 2,
                          g + 2, g + 2, g + 2, g + 2, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1,
                          g, g, g, g, g, g, g, g);
}

// q4_K / q5_K against NT q8_K rows; the weight side of a block once for all NT tokens, and
// each token runs the instruction sequence of NT = 1 (so a tile gives a token the bits of the
// one-token dot). Per int32 lane and block: 4 pair products of at most 2 * 31 * 128 * 63.
template <typename Ops, int NT, typename Block>
void DotK4Rows(const void* w, const void* const* x, int64_t n, float* out) {
  constexpr bool kQ5 = std::is_same_v<Block, block_q5_K>;  // q5_K: a fifth bit from qh
  const auto* a = static_cast<const Block*>(w);
  const block_q8_K* b[NT];
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const block_q8_K*>(x[t]);
  const __m512i m4 = _mm512_set1_epi8(0xF);
  const __m256i mins_idx = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  float acc[NT] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float wd = _cvtsh_ss(a[i].d), wdmin = _cvtsh_ss(a[i].dmin);
    uint32_t utmp[4];
    UnpackK4Scales(a[i].scales, utmp);
    // int16 lanes 0..7 = scales, 8..15 = mins.
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(utmp)));
    const __m512i sm512 = _mm512_castsi256_si512(sm);
    const __m256i mins2 = _mm256_permutexvar_epi16(mins_idx, sm);  // m0 m0 m1 m1 ... m7 m7
    __m512i hbits = _mm512_setzero_si512();
    if constexpr (kQ5) hbits = Broadcast32(a[i].qh);
    __m512i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles)
      const __m512i raw = Broadcast32(a[i].qs + 32 * c);
      __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), m4);
      if constexpr (kQ5) {  // bit 2c of qh[l] goes with the low half, bit 2c + 1 with the high
        const __m512i bit =
            _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                   _mm512_set1_epi8(static_cast<char>(1 << (2 * c + 1))));
        q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hbits, bit), q, _mm512_set1_epi8(16));
      }
      const __m512i sc = _mm512_permutexvar_epi16(HalvesIdx(2 * c, 2 * c + 1), sm512);
      for (int t = 0; t < NT; ++t)
        sumi[t] = Ops::MaddAcc(sumi[t], sc, _mm512_maddubs_epi16(q, LoadZ(b[t][i].qs + 64 * c)));
    }
    for (int t = 0; t < NT; ++t) {  // exact S and M, then the canonical chain of ref::PackedTile
      const __m256i summ = _mm256_madd_epi16(mins2, LoadY(b[t][i].bsums));  // m_j * (bsum 2j + 2j+1)
      const __m256i s8 = _mm256_add_epi32(LoHalf(sumi[t]), HiHalf(sumi[t]));
      acc[t] = std::fma(b[t][i].d * wd, static_cast<float>(HsumI32x8(s8)), acc[t]);
      acc[t] = std::fma(-(b[t][i].d * wdmin), static_cast<float>(HsumI32x8(summ)), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// q6_K against NT q8_K rows. The quants are used unsigned (0..63) and the offset comes off as
// 32 * sum_j sc_j * bsum_j, exact in int32: |that| <= 32 * 16 * 128 * 2048 = 2^27, and each
// lane's pair products at most 8 * 2 * 63 * 128 * 128. Per super-block the exact S (all lanes),
// then acc = fma(d * d_x, S, acc) as every q6_K path.
template <typename Ops, int NT>
void DotQ6_KRows(const void* w, const void* const* x, int64_t n, float* out) {
  const auto* a = static_cast<const block_q6_K*>(w);
  const block_q8_K* b[NT];
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const block_q8_K*>(x[t]);
  const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
  float acc[NT] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float wd = _cvtsh_ss(a[i].d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales)));
    const __m512i sc512 = _mm512_castsi256_si512(sc16);
    __m512i sumi[NT];
    for (int t = 0; t < NT; ++t) {
      const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, LoadY(b[t][i].bsums)), 5);
      sumi[t] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), corr));
    }
    for (int h = 0; h < 2; ++h) {  // elements 128h .. 128h + 127
      const __m512i ql = LoadZ(a[i].ql + 64 * h);
      const __m512i hb = Broadcast32(a[i].qh + 32 * h);
      // Low half: bits 0-1 (then 4-5) of qh; high half: bits 2-3 (then 6-7).
      const __m512i hlo = _mm512_mask_srli_epi16(hb, 0xFFFF0000u, hb, 2);
      const __m512i hhi = _mm512_srli_epi16(hlo, 4);
      const __m512i q[2] = {
          _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(hlo, m3), 4)),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                          _mm512_slli_epi16(_mm512_and_si512(hhi, m3), 4)),
      };
      for (int k = 0; k < 2; ++k) {  // elements 128h + 64k .. +63: scale groups 8h + 4k ..
        const __m512i sc = _mm512_permutexvar_epi16(QuartersIdx(8 * h + 4 * k), sc512);
        for (int t = 0; t < NT; ++t)
          sumi[t] =
              Ops::MaddAcc(sumi[t], sc, _mm512_maddubs_epi16(q[k], LoadZ(b[t][i].qs + 128 * h + 64 * k)));
      }
    }
    for (int t = 0; t < NT; ++t) {  // the exact S, then the canonical chain of ref::PackedTile
      const int32_t S = HsumI32x8(_mm256_add_epi32(LoHalf(sumi[t]), HiHalf(sumi[t])));
      acc[t] = std::fma(b[t][i].d * wd, static_cast<float>(S), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// The table entries (dispatch.h DotFn / DotTileFn) of one Ops; tiles of up to kMaxDotTile.
template <typename Ops>
struct KQuantDots512 {
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
  static void TileQ4_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
    WithTokens8(nt, [=](auto k) { DotK4Rows<Ops, decltype(k)::value, block_q4_K>(w, x, n, out); });
  }
  static void TileQ5_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
    WithTokens8(nt, [=](auto k) { DotK4Rows<Ops, decltype(k)::value, block_q5_K>(w, x, n, out); });
  }
  static void TileQ6_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
    WithTokens8(nt, [=](auto k) { DotQ6_KRows<Ops, decltype(k)::value>(w, x, n, out); });
  }
};

}  // namespace
}  // namespace ferry::kernels::avx512
