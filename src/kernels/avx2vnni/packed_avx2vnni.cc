// AVX-VNNI packed MatMul micro-kernel: the 256-bit body of avx2/packed_tile.h with vpdpbusd
// (u8 x s8, four products summed into each int32 lane) for the integer sums.
#include "kernels/avx2/packed_tile.h"
#include "kernels/avx2vnni/avx2vnni.h"

namespace ferry::kernels::avx2vnni {
namespace {

// A block's int32 lane sums at most 32 * 255 * 127 < 2^21 in magnitude: exact.
struct VnniOps {
  static __m256i Acc4(__m256i s, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(s, lo, xl), hi, xh);
  }
  static __m256i Sum4(__m256i s) { return s; }
  static __m256i Acc6(__m256i s, __m256i a, __m256i xa, __m256i b, __m256i xb) {  // q6_K, 0..63
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(s, a, xa), b, xb);
  }
  // Signed 8-bit weights become unsigned w + 128 (xor of the sign bit); 128 * s[b] comes off.
  static __m256i Prep8(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))); }
  static __m256i Acc8(__m256i s, __m256i w, __m256i x) { return _mm256_dpbusd_avx_epi32(s, w, x); }
  static constexpr int kBias8 = 128;
};

}  // namespace

void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  packed256::PackedTile<VnniOps>(grp, sh, act, nt, n_grp, y);
}

}  // namespace ferry::kernels::avx2vnni
