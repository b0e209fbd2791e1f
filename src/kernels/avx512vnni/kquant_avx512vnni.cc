// AVX512-VNNI in-place dots: kquant_512.h with vpdpwssd as the MAC (the avx512 table's bits),
// and the q4_0 / q8_0 chains of dot_chain_256.h with 256-bit vpdpbusd (the chain is serial, so
// wider registers buy nothing there).
#include "kernels/avx2/dot_chain_256.h"
#include "kernels/avx512/kquant_512.h"
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/in_place_dots_fill.h"

namespace ferry::kernels::avx512vnni {
namespace {
struct VnniOps {
  static __m512i MaddAcc(__m512i acc, __m512i a, __m512i b) { return _mm512_dpwssd_epi32(acc, a, b); }
};
using KDots = avx512::KQuantDots512<VnniOps>;
struct VnniSums {
  static __m256i DotU8(__m256i u, __m256i y) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, y); }
  static __m256i DotI8(__m256i x, __m256i y) { return DotU8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }
};
using Chain = avx2::ChainDots256<VnniSums>;
}  // namespace

void FillKQuantDots(internal::KernelTable& t) {
  internal::SetKQuantDots<KDots>(t);
  internal::SetChainDots<Chain>(t);
}

}  // namespace ferry::kernels::avx512vnni
