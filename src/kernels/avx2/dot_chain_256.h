// q4_0 / q8_0 / mxfp4 in-place dots in the packed kernels' float order (ref::PackedTile): an exact
// int32 sum per 32-element block, then acc = fma(d_w * d_x, float(isum), acc) block by block
// into one float, so a --no-repack run computes the bits of a repacked one. The block sums are
// 256-bit and templated over Ops (DotI8: int8 x int8, DotU8: uint8 x int8, 8 int32 lanes each):
// maddubs + madd on avx2, vpdpbusd on AVX-VNNI and AVX512-VNNI (VL). Eight blocks at a time are
// reduced to one register of eight sums; the float chain itself is serial by definition, so
// a call may take up to eight weight rows (against one activation row): one chain per lane.
// Only the ISA folders include this file; everything in it has internal linkage.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/avx2/avx2_util.h"
#include "kernels/dispatch.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels::avx2 {
namespace {

// The weight scales of blocks b[0..7] as floats: q4_0 / q8_0's fp16 d (F16C), MXFP4's e8m0
// exponent as 2^(e - 128) (E8M0ToFp32Half: e < 2 are the denormals 2^-128, 2^-127).
template <typename WB>
inline __m256 BlockScales8(const WB* const* b) {
  const __m128i h = _mm_setr_epi16(static_cast<int16_t>(b[0]->d), static_cast<int16_t>(b[1]->d),
                                   static_cast<int16_t>(b[2]->d), static_cast<int16_t>(b[3]->d),
                                   static_cast<int16_t>(b[4]->d), static_cast<int16_t>(b[5]->d),
                                   static_cast<int16_t>(b[6]->d), static_cast<int16_t>(b[7]->d));
  return _mm256_cvtph_ps(h);
}
inline __m256 BlockScales8(const block_mxfp4* const* b) {
  return E8M0HalfLanes(
      _mm256_setr_epi32(b[0]->e, b[1]->e, b[2]->e, b[3]->e, b[4]->e, b[5]->e, b[6]->e, b[7]->e));
}
template <typename WB>
inline float BlockScale(const WB& b) {
  return _cvtsh_ss(b.d);
}
inline float BlockScale(const block_mxfp4& b) {
  return E8M0ToFp32Half(b.e);
}

// MXFP4's 32 e2m1 codes of a block -> their doubled values as int8 (kMxfp4Values): the
// nibbles as q4_0's, then one in-lane byte shuffle through the 16-entry table.
inline __m256i Mxfp4ToBytes(const uint8_t* qs) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
  return _mm256_shuffle_epi8(table, NibblesToBytes(qs));
}

// Lane k of the result = the sum of v[k]'s eight lanes.
inline __m256i ReduceEight(const __m256i v[8]) {
  const __m256i b0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

// For each of R weight rows a[r]: the sum over blocks, in order, of fma(d_w[r][i] * yd[i],
// float(isum), acc) with isum = the lanes of block_sum(a[r], i) minus 8 * sums[i] (sums:
// q4_0's offset; null for none). The R chains are independent (row r gets the bits of R = 1);
// several rows per call let their serial fma chains overlap.
template <int R, typename WB, typename BlockSum>
void ChainRows(const WB* const* a, const float* yd, const int32_t* sums, int64_t nb, BlockSum block_sum,
               float* out) {
  float acc[R];
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  alignas(32) float sc[R][8], fi[R][8];
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    for (int r = 0; r < R; ++r) {
      __m256i v[8];
      for (int k = 0; k < 8; ++k) v[k] = block_sum(a[r], i + k);
      __m256i isum = ReduceEight(v);
      if (sums)
        isum = _mm256_sub_epi32(
            isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + i)), 3));
      const WB* w = a[r] + i;
      const WB* const blocks[8] = {w, w + 1, w + 2, w + 3, w + 4, w + 5, w + 6, w + 7};
      _mm256_store_ps(sc[r], _mm256_mul_ps(BlockScales8(blocks), _mm256_loadu_ps(yd + i)));
      _mm256_store_ps(fi[r], _mm256_cvtepi32_ps(isum));
    }
    for (int k = 0; k < 8; ++k)
      for (int r = 0; r < R; ++r) acc[r] = std::fma(sc[r][k], fi[r][k], acc[r]);
  }
  for (; i < nb; ++i)
    for (int r = 0; r < R; ++r) {
      const int32_t isum = HsumI32x8(block_sum(a[r], i)) - (sums ? 8 * sums[i] : 0);
      acc[r] = std::fma(BlockScale(a[r][i]) * yd[i], static_cast<float>(isum), acc[r]);
    }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

// Eight rows with one chain per float lane (the packed kernels' shape): for each block, the
// eight rows' int sums are reduced into the lanes of one register, and one vector fma does
// fma(d_w[r][i] * yd[i], float(isum), acc[r]) for all of them: lane r gets ChainRows<1>'s bits.
template <typename WB, typename BlockSum>
void ChainEightRows(const WB* const* a, const float* yd, const int32_t* sums, int64_t nb, BlockSum block_sum,
                    float* out) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i v[8];
    for (int r = 0; r < 8; ++r) v[r] = block_sum(a[r], i);
    __m256i isum = ReduceEight(v);
    if (sums) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * sums[i]));
    const WB* const blocks[8] = {a[0] + i, a[1] + i, a[2] + i, a[3] + i,
                                 a[4] + i, a[5] + i, a[6] + i, a[7] + i};
    const __m256 sc = _mm256_mul_ps(BlockScales8(blocks), _mm256_set1_ps(yd[i]));
    acc = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(isum), acc);
  }
  _mm256_storeu_ps(out, acc);
}

// Rows r < nr (1..8) at w + r * row_bytes: eight at once in float lanes (a short group pads
// with copies of row 0, whose results are dropped), one row alone through ChainRows<1>.
template <typename WB, typename BlockSum>
void ChainRowsN(const void* w, size_t row_bytes, const float* yd, const int32_t* sums, int nr, int64_t nb,
                BlockSum block_sum, float* out) {
  const WB* a[8];
  for (int r = 0; r < 8; ++r)
    a[r] = reinterpret_cast<const WB*>(static_cast<const char*>(w) +
                                       static_cast<size_t>(r < nr ? r : 0) * row_bytes);
  if (nr == 1) return ChainRows<1>(a, yd, sums, nb, block_sum, out);
  float tmp[8];
  ChainEightRows(a, yd, sums, nb, block_sum, tmp);
  for (int r = 0; r < nr; ++r) out[r] = tmp[r];
}

// The table entries (dispatch.h DotFn, DotRowsFn) of one Ops.
template <typename Ops>
struct ChainDots256 {
  static __m256i Load(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void RowsQ4_0(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out) {
    const int64_t nb = n / 32;
    const auto* b = static_cast<const block_q8_0*>(x);
    ChainRowsN<block_q4_0>(
        w, row_bytes, internal::ActScales(x, nb, sizeof(block_q8_0)), internal::ActSumsQ8_0(x, nb), nr, nb,
        [=](const block_q4_0* a, int64_t i) { return Ops::DotU8(NibblesToBytes(a[i].qs), Load(b[i].qs)); },
        out);
  }
  static void RowsQ8_0(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out) {
    const int64_t nb = n / 32;
    const auto* b = static_cast<const block_q8_0*>(x);
    ChainRowsN<block_q8_0>(
        w, row_bytes, internal::ActScales(x, nb, sizeof(block_q8_0)), nullptr, nr, nb,
        [=](const block_q8_0* a, int64_t i) { return Ops::DotI8(Load(a[i].qs), Load(b[i].qs)); }, out);
  }
  // MXFP4 x q8_0: the table's signed values times q (no offset term), q4_0's float order.
  static void RowsMXFP4(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out) {
    const int64_t nb = n / 32;
    const auto* b = static_cast<const block_q8_0*>(x);
    ChainRowsN<block_mxfp4>(
        w, row_bytes, internal::ActScales(x, nb, sizeof(block_q8_0)), nullptr, nr, nb,
        [=](const block_mxfp4* a, int64_t i) { return Ops::DotI8(Mxfp4ToBytes(a[i].qs), Load(b[i].qs)); },
        out);
  }
  static float MXFP4(const void* w, const void* x, int64_t n) {
    float out;
    RowsMXFP4(w, 0, x, 1, n, &out);
    return out;
  }
  static float Q4_0(const void* w, const void* x, int64_t n) {
    float out;
    RowsQ4_0(w, 0, x, 1, n, &out);
    return out;
  }
  static float Q8_0(const void* w, const void* x, int64_t n) {
    float out;
    RowsQ8_0(w, 0, x, 1, n, &out);
    return out;
  }
};

}  // namespace
}  // namespace ferry::kernels::avx2
