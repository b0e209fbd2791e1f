// The integer-sum Ops of the 256-bit packed body (avx2/packed_tile.h): maddubs + madd
// (Avx2Ops) and vpdpbusd (Vnni256Ops). Shared by the 256-bit tables and by the 512-bit ones,
// whose one-token tiles of some types run the 256-bit body (avx512/packed_tile512.h). Only
// ISA-folder .cc files include this.
#pragma once

#include "kernels/x86_intrinsics.h"

namespace ferry::kernels::packed256 {
namespace {

// vpdpbusd on 256 bits: the VEX form (AVX-VNNI) or the EVEX one (AVX512_VNNI + VL).
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
inline __m256i Dpbusd256(__m256i s, __m256i u, __m256i x) {
  return _mm256_dpbusd_epi32(s, u, x);
}
#elif defined(__AVXVNNI__)
inline __m256i Dpbusd256(__m256i s, __m256i u, __m256i x) {
  return _mm256_dpbusd_avx_epi32(s, u, x);
}
#endif

struct Avx2Ops {
  // 4-bit: int16 sums for a whole block; each maddubs lane is at most 2 * 15 * 127 = 3810 in
  // magnitude, 8 of them 30480.
  static __m256i Acc4(__m256i s16, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_add_epi16(s16,
                            _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)));
  }
  static __m256i Sum4(__m256i s16) { return _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); }
  // 6-bit (q6_K, 0..63): two loads summed in int16 (|.| <= 2 * 2 * 63 * 128 = 32256), then
  // widened into the int32 sums.
  static __m256i Acc6(__m256i s32, __m256i a, __m256i xa, __m256i b, __m256i xb) {
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(a, xa), _mm256_maddubs_epi16(b, xb));
    return _mm256_add_epi32(s32, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  // 8-bit: |w| x sign-adjusted x; pairs reach 2 * 128 * 127, so each maddubs is widened by madd.
  struct W8 {
    __m256i w, aw;
  };
  static W8 Prep8(__m256i w) { return {w, _mm256_sign_epi8(w, w)}; }
  static __m256i Acc8(__m256i s32, W8 w, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(w.aw, _mm256_sign_epi8(x, w.w));
    return _mm256_add_epi32(s32, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static constexpr int kBias8 = 0;
};

#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
// A block's int32 lane sums at most 32 * 255 * 127 < 2^21 in magnitude: exact.
struct Vnni256Ops {
  static __m256i Acc4(__m256i s, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return Dpbusd256(Dpbusd256(s, lo, xl), hi, xh);
  }
  static __m256i Sum4(__m256i s) { return s; }
  static __m256i Acc6(__m256i s, __m256i a, __m256i xa, __m256i b, __m256i xb) {  // q6_K, 0..63
    return Dpbusd256(Dpbusd256(s, a, xa), b, xb);
  }
  // Signed 8-bit weights become unsigned w + 128 (xor of the sign bit); 128 * s[b] comes off.
  static __m256i Prep8(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))); }
  static __m256i Acc8(__m256i s, __m256i w, __m256i x) { return Dpbusd256(s, w, x); }
  static constexpr int kBias8 = 128;
};
#endif

}  // namespace
}  // namespace ferry::kernels::packed256
