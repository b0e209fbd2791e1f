#include "kernels/avx2/sparse_avx2.h"

#include <immintrin.h>

#include "core/fp16.h"

namespace ferry::kernels::avx2 {

void AxpyF16(float a, const uint16_t* w, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, wv, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * Fp16ToFp32(w[i]);
}

}  // namespace ferry::kernels::avx2
