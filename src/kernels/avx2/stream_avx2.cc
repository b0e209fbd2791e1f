// AVX2 streaming read for the memory-bandwidth probe: four independent 256-bit load+add
// chains, so the loop is bound by memory, not by add latency.
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"

namespace ferry::kernels::avx2 {

double ReadSum(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
  }
  double s = HsumF32x8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

}  // namespace ferry::kernels::avx2
