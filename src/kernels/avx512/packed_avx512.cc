// AVX-512 (F+BW) packed MatMul micro-kernel: the 512-bit body of packed_tile512.h with
// maddubs + madd for the integer sums.
#include "kernels/avx2/packed_ops256.h"
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/packed_tile512.h"

namespace ferry::kernels::avx512 {
namespace {

struct Avx512Ops {
  // 4-bit: int16 sums for a whole block (each maddubs lane <= 2 * 15 * 127, 8 of them 30480).
  static __m512i Acc4(__m512i s16, __m512i lo, __m512i xl, __m512i hi, __m512i xh) {
    return _mm512_add_epi16(s16,
                            _mm512_add_epi16(_mm512_maddubs_epi16(lo, xl), _mm512_maddubs_epi16(hi, xh)));
  }
  static __m512i Sum4(__m512i s16) { return _mm512_madd_epi16(s16, _mm512_set1_epi16(1)); }
  // 6-bit (q6_K, 0..63): two loads summed in int16 (|.| <= 2 * 2 * 63 * 128 = 32256), then
  // widened into the int32 sums.
  static __m512i Acc6(__m512i s32, __m512i a, __m512i xa, __m512i b, __m512i xb) {
    const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(a, xa), _mm512_maddubs_epi16(b, xb));
    return _mm512_add_epi32(s32, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
  }
  // 8-bit: |w| x (x negated where w < 0); AVX-512 has no vpsignb, a masked subtract does it.
  // Pairs reach 2 * 128 * 127 < 2^15, so each maddubs is exact and widened by madd.
  struct W8 {
    __m512i aw;
    __mmask64 neg;
  };
  static W8 Prep8(__m512i w) { return {_mm512_abs_epi8(w), _mm512_movepi8_mask(w)}; }
  static __m512i Acc8(__m512i s32, W8 w, __m512i x) {
    const __m512i sx = _mm512_mask_sub_epi8(x, w.neg, _mm512_setzero_si512(), x);
    return _mm512_add_epi32(s32, _mm512_madd_epi16(_mm512_maddubs_epi16(w.aw, sx), _mm512_set1_epi16(1)));
  }
  static constexpr int kBias8 = 0;
};

}  // namespace

void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  packed512::PackedTile<Avx512Ops, packed256::Avx2Ops>(grp, sh, act, nt, n_grp, y);
}

}  // namespace ferry::kernels::avx512
