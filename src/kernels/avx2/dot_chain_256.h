// q4_0 / q8_0 in-place dots in the packed kernels' float order (ref::PackedTile): an exact
// int32 sum per 32-element block, then acc = fma(d_w * d_x, float(isum), acc) block by block
// into one float, so a --no-repack run computes the bits of a repacked one. The block sums are
// 256-bit and templated over Ops (DotI8: int8 x int8, DotU8: uint8 x int8, 8 int32 lanes each):
// maddubs + madd on avx2, vpdpbusd on AVX-VNNI and AVX512-VNNI (VL). Eight blocks at a time are
// reduced to one register of eight sums; the float chain itself is serial by definition.
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

// Lane k of the result = the sum of v[k]'s eight lanes.
inline __m256i ReduceEight(const __m256i v[8]) {
  const __m256i b0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

// sum over blocks in order of fma(d_w[i] * yd[i], float(isum_i), acc) with isum_i = the lanes
// of block_sum(i) minus 8 * sums[i] (sums: q4_0's offset; null for none).
template <typename WB, typename BlockSum>
float ChainBlocks32(const WB* a, const float* yd, const int32_t* sums, int64_t nb, BlockSum block_sum) {
  float acc = 0.f;
  alignas(32) float sc[8], fi[8];
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    __m256i v[8];
    for (int k = 0; k < 8; ++k) v[k] = block_sum(i + k);
    __m256i isum = ReduceEight(v);
    if (sums)
      isum = _mm256_sub_epi32(
          isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + i)), 3));
    const __m128i h = _mm_setr_epi16(static_cast<int16_t>(a[i].d), static_cast<int16_t>(a[i + 1].d),
                                     static_cast<int16_t>(a[i + 2].d), static_cast<int16_t>(a[i + 3].d),
                                     static_cast<int16_t>(a[i + 4].d), static_cast<int16_t>(a[i + 5].d),
                                     static_cast<int16_t>(a[i + 6].d), static_cast<int16_t>(a[i + 7].d));
    _mm256_store_ps(sc, _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_loadu_ps(yd + i)));
    _mm256_store_ps(fi, _mm256_cvtepi32_ps(isum));
    for (int k = 0; k < 8; ++k) acc = std::fma(sc[k], fi[k], acc);
  }
  for (; i < nb; ++i) {
    const int32_t isum = HsumI32x8(block_sum(i)) - (sums ? 8 * sums[i] : 0);
    acc = std::fma(_cvtsh_ss(a[i].d) * yd[i], static_cast<float>(isum), acc);
  }
  return acc;
}

// The table entries (dispatch.h DotFn) of one Ops.
template <typename Ops>
struct ChainDots256 {
  static __m256i Load(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static float Q4_0(const void* w, const void* x, int64_t n) {
    const int64_t nb = n / 32;
    const auto* a = static_cast<const block_q4_0*>(w);
    const auto* b = static_cast<const block_q8_0*>(x);
    return ChainBlocks32(a, internal::ActScales(x, nb, sizeof(block_q8_0)), internal::ActSumsQ8_0(x, nb), nb,
                         [=](int64_t i) { return Ops::DotU8(NibblesToBytes(a[i].qs), Load(b[i].qs)); });
  }
  static float Q8_0(const void* w, const void* x, int64_t n) {
    const int64_t nb = n / 32;
    const auto* a = static_cast<const block_q8_0*>(w);
    const auto* b = static_cast<const block_q8_0*>(x);
    return ChainBlocks32(a, internal::ActScales(x, nb, sizeof(block_q8_0)), nullptr, nb,
                         [=](int64_t i) { return Ops::DotI8(Load(a[i].qs), Load(b[i].qs)); });
  }
};

}  // namespace
}  // namespace ferry::kernels::avx2
