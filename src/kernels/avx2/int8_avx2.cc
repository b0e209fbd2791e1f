// AVX2 W8A8 kernels: int8 activation quantization and int8 x int8 dots with maddubs (sign
// trick: |w| unsigned times sign-adjusted x, exact because |w| <= 128 and |x| <= 127 keep each
// pair sum below 2^15). Integer sums are exact, so results equal ref:: bit for bit.
#include <algorithm>
#include <cmath>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"

namespace ferry::kernels::avx2 {

float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q) {
  float s = static_scale;
  int64_t i = 0;
  if (s <= 0.f) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    __m256 vmax = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8)
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(x + i)));
    __m128 m = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float amax = _mm_cvtss_f32(m);
    for (; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    s = amax / 127.f;
  }
  const float inv = s > 0.f ? 1.0f / s : 0.f;
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j) {
      __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), vinv);
      f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
      v[j] = _mm256_cvtps_epi32(_mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // Pack 32 int32 -> 32 int8; the packs interleave 128-bit lanes, the permute restores order.
    const __m256i p16a = _mm256_packs_epi32(v[0], v[1]), p16b = _mm256_packs_epi32(v[2], v[3]);
    const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), p8);
  }
  for (; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(std::clamp(x[i] * inv, -127.f, 127.f)));
  return s;
}

int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n) {
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 32));
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 32));
    acc0 = _mm256_add_epi32(acc0, MulSumI8(w0, x0));
    acc1 = _mm256_add_epi32(acc1, MulSumI8(w1, x1));
  }
  for (; i + 32 <= n; i += 32) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    acc0 = _mm256_add_epi32(acc0, MulSumI8(w0, x0));
  }
  int32_t sum = HsumI32x8(_mm256_add_epi32(acc0, acc1));
  for (; i < n; ++i) sum += static_cast<int32_t>(w[i]) * static_cast<int32_t>(x[i]);
  return sum;
}

// Four weight rows against one activation row: each x load feeds four rows (decode GEMV).
void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    for (int r = 0; r < 4; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * w_stride + i));
      acc[r] = _mm256_add_epi32(acc[r], MulSumI8(wv, xv));
    }
  }
  for (int r = 0; r < 4; ++r) {
    int32_t sum = HsumI32x8(acc[r]);
    for (int64_t j = i; j < n; ++j)
      sum += static_cast<int32_t>(w[r * w_stride + j]) * static_cast<int32_t>(x[j]);
    out[r] = sum;
  }
}

}  // namespace ferry::kernels::avx2
