// AVX-512 streaming read for the memory-bandwidth probe: four independent 512-bit load+add
// chains, so the loop is bound by memory, not by add latency.
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/avx512_util.h"

namespace ferry::kernels::avx512 {

double ReadSum(const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
         a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(x + i + 48));
  }
  double s = HsumF32x16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

}  // namespace ferry::kernels::avx512
