// AVX-VNNI in-place dots: the 256-bit bodies of the avx2 table (kquant_256.h, dot_chain_256.h)
// with vpdpwssd / vpdpbusd as the MACs, so they give the avx2 table's bits in fewer instructions.
#include <immintrin.h>

#include "kernels/avx2/dot_chain_256.h"
#include "kernels/avx2/kquant_256.h"
#include "kernels/avx2vnni/avx2vnni.h"
#include "kernels/in_place_dots_fill.h"

namespace ferry::kernels::avx2vnni {
namespace {
struct VnniOps {
  static __m256i MaddAcc(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
};
using KDots = avx2::KQuantDots256<VnniOps>;
struct VnniSums {
  static __m256i DotU8(__m256i u, __m256i y) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, y); }
  static __m256i DotI8(__m256i x, __m256i y) { return DotU8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }
};
using Chain = avx2::ChainDots256<VnniSums>;
}  // namespace

void FillKQuantDots(internal::KernelTable& t) {
  internal::SetKQuantDots<KDots>(t);
  internal::SetChainDots<Chain>(t);
}

}  // namespace ferry::kernels::avx2vnni
