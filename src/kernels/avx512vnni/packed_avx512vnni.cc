// AVX512_VNNI packed MatMul micro-kernel: the 512-bit body of avx512/packed_tile512.h with
// vpdpbusd (u8 x s8, four products per int32 lane; the activation dword an embedded broadcast).
#include "kernels/avx2/packed_ops256.h"
#include "kernels/avx512/packed_tile512.h"
#include "kernels/avx512vnni/avx512vnni.h"

namespace ferry::kernels::avx512vnni {
namespace {

// A block's int32 lane sums at most 32 * 255 * 127 < 2^21 in magnitude: exact.
struct VnniOps {
  static __m512i Acc4(__m512i s, __m512i lo, __m512i xl, __m512i hi, __m512i xh) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s, lo, xl), hi, xh);
  }
  static __m512i Sum4(__m512i s) { return s; }
  static __m512i Acc6(__m512i s, __m512i a, __m512i xa, __m512i b, __m512i xb) {  // q6_K, 0..63
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s, a, xa), b, xb);
  }
  // Signed 8-bit weights become unsigned w + 128 (xor of the sign bit); 128 * s[b] comes off.
  static __m512i Prep8(__m512i w) { return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80))); }
  static __m512i Acc8(__m512i s, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(s, w, x); }
  static constexpr int kBias8 = 128;
};

}  // namespace

void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  packed512::PackedTile<VnniOps, packed256::Vnni256Ops>(grp, sh, act, nt, n_grp, y);
}

}  // namespace ferry::kernels::avx512vnni
