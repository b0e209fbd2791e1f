// AVX2 packed MatMul micro-kernels (layout: kernels/packed_layout.h). 8 rows per register: a
// 32-bit lane holds 4 quants of one row, the activation's 4 matching bytes are broadcast, and
// maddubs + madd give every row's partial sums at once. The weights of a block are unpacked
// once and used for NT tokens. Float work per block and token: one scale product and one FMA,
// in the same order as ref::PackedTile, so results are bit-identical to it.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"
#include "kernels/packed_layout.h"

namespace ferry::kernels::avx2 {
namespace {

using internal::PackedAct;
using internal::PackedShape;

inline __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256 LoadScales8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 4-bit weights (q4_0: z = 8, int4: z per group). Integer sums stay in int16 for a whole
// block: each maddubs lane is at most 2 * 15 * 127 = 3810 in magnitude, 8 of them 30480.
template <int NT, bool kInt4>
void Tile4(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const int64_t nb = sh.nb();
  const int64_t bpg = kInt4 ? sh.group / 32 : 1;
  const uint8_t* qs = grp;
  const auto* dsc = reinterpret_cast<const uint16_t*>(grp + sh.QsBytes());
  const uint8_t* zs = kInt4 ? grp + sh.QsBytes() + sh.ng() * internal::kPackRows * 2 : nullptr;
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  __m256 dw = _mm256_setzero_ps();
  __m256i zv = _mm256_set1_epi32(8);  // int16 pairs (z, 0) per row lane
  int64_t group_end = 0;  // int4: first block of the next group (a counter, not b % bpg per block)
  for (int64_t b = 0, g = 0; b < nb; ++b) {
    if (kInt4) {
      if (b == group_end) {
        dw = LoadScales8(dsc + g * 8);
        zv = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zs + g * 8)));
        ++g;
        group_end += bpg;
      }
    } else {
      dw = LoadScales8(dsc + b * 8);
    }
    const uint8_t* wb = qs + b * 128;
    __m256i s16[NT];
    for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 * j));
      const __m256i lo = _mm256_and_si256(w, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
      for (int t = 0; t < NT; ++t) {
        const int8_t* xq = act[t].qs + b * 32;
        const __m256i pl = _mm256_maddubs_epi16(lo, Bcast4(xq + 4 * j));
        const __m256i ph = _mm256_maddubs_epi16(hi, Bcast4(xq + 16 + 4 * j));
        s16[t] = _mm256_add_epi16(s16[t], _mm256_add_epi16(pl, ph));
        KeepInRegister(s16[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m256i corr = _mm256_madd_epi16(zv, _mm256_set1_epi32(act[t].s[b] & 0xFFFF));
      const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16[t], ones), corr);
      const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[b]));
      acc[t] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y[t], acc[t]);
}

// 8-bit weights: |w * x| pairs reach 2 * 128 * 127, so each maddubs is widened by madd.
template <int NT>
void Tile8(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const int64_t nb = sh.nb();
  const uint8_t* qs = grp;
  const auto* dsc = reinterpret_cast<const uint16_t*>(grp + sh.QsBytes());
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256 dw = LoadScales8(dsc + b * 8);
    const uint8_t* wb = qs + b * 256;
    __m256i s32[NT];
    for (int t = 0; t < NT; ++t) s32[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 * s));
      const __m256i aw = _mm256_sign_epi8(w, w);
      for (int t = 0; t < NT; ++t) {
        const __m256i x = _mm256_sign_epi8(Bcast4(act[t].qs + b * 32 + 4 * s), w);
        s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, x), ones));
        KeepInRegister(s32[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[b]));
      acc[t] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s32[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y[t], acc[t]);
}

}  // namespace

void PackedTile(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, int nt, float* const* y) {
  static_assert(internal::kMaxTileTokens == 4, "WithTokens instantiates 1..4 tokens");
  WithTokens(nt, [=](auto k) {
    constexpr int NT = decltype(k)::value;
    if (sh.type == DType::kQ8_0) {
      Tile8<NT>(grp, sh, act, y);
    } else if (sh.is_int4()) {
      Tile4<NT, true>(grp, sh, act, y);
    } else {
      Tile4<NT, false>(grp, sh, act, y);
    }
  });
}

}  // namespace ferry::kernels::avx2
