// AVX2 packed MatMul micro-kernel: the 256-bit body of packed_tile.h with maddubs + madd for
// the integer sums (the sign trick for signed 8-bit weights).
#include "kernels/avx2/avx2.h"
#include "kernels/avx2/packed_tile.h"

namespace ferry::kernels::avx2 {
namespace {

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

}  // namespace

void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  packed256::PackedTile<Avx2Ops>(grp, sh, act, nt, n_grp, y);
}

}  // namespace ferry::kernels::avx2
