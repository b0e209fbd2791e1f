// AVX-512 (F+BW+VL+DQ) K-quant dots: kquant_512.h with vpmaddwd + vpaddd as the MAC.
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/kquant_512.h"
#include "kernels/in_place_dots_fill.h"

namespace ferry::kernels::avx512 {
namespace {
struct MaddOps {
  static __m512i MaddAcc(__m512i acc, __m512i a, __m512i b) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }
};
using KDots = KQuantDots512<MaddOps>;
}  // namespace

void FillKQuantDots(internal::KernelTable& t) {
  internal::SetKQuantDots<KDots>(t);
}

}  // namespace ferry::kernels::avx512
