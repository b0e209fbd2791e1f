// AVX2 activation quantizers for MatMul; each is bit-identical to its ref:: twin.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels::avx2 {
namespace {

// Quantizes 32 floats with multiplier id (round half to even); returns 4 int32 vectors.
inline void Round32(const float* x, float id, __m256i out[4]) {
  const __m256 mul = _mm256_set1_ps(id);
  for (int k = 0; k < 4; ++k) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul);
    out[k] = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

// Packs 4x8 int32 (saturating) into 32 int8 in element order.
inline __m256i Pack32(const __m256i v[4]) {
  const __m256i a = _mm256_packs_epi32(v[0], v[1]);
  const __m256i b = _mm256_packs_epi32(v[2], v[3]);
  const __m256i c = _mm256_packs_epi16(a, b);
  return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline float AbsMax32(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

}  // namespace

void QuantizeActQ8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const float amax = AbsMax32(x);
    const float d = amax / 127.f;
    y[i].d = Fp32ToFp16(d);
    __m256i v[4];
    Round32(x, amax != 0.f ? 127.f / amax : 0.f, v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), Pack32(v));
  }
}

void QuantizeActQ8_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const float amax = AbsMax32(x);
    const float d = amax / 127.f;
    y[i].d = Fp32ToFp16(d);
    __m256i v[4];
    Round32(x, amax != 0.f ? 127.f / amax : 0.f, v);
    const int sum = HsumI32x8(_mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])));
    y[i].s = Fp32ToFp16(d * static_cast<float>(sum));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), Pack32(v));
  }
}

void QuantizeActQ8_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_K*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K; k += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0.f) {
      y[i].d = 0.f;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    // The signed value of the first element reaching amax (the reference's `max`).
    float max = amax;
    const __m256 va = _mm256_set1_ps(amax);
    for (int k = 0; k < kQK_K; k += 8) {
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), va, _CMP_EQ_OQ));
      if (mask) {
        max = x[k + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 mul = _mm256_set1_ps(iscale);
    const __m256i lim = _mm256_set1_epi32(127);
    for (int g = 0; g < kQK_K; g += 32) {
      __m256i v[4];
      for (int k = 0; k < 4; ++k)
        v[k] = _mm256_min_epi32(lim, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 8 * k), mul)));
      y[i].bsums[g / 16] = static_cast<int16_t>(HsumI32x8(_mm256_add_epi32(v[0], v[1])));
      y[i].bsums[g / 16 + 1] = static_cast<int16_t>(HsumI32x8(_mm256_add_epi32(v[2], v[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + g), Pack32(v));
    }
    y[i].d = 1 / iscale;
  }
}

void QuantizeActF16(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}

void QuantizeActBf16(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(64);
  for (; i + 16 <= n; i += 16) {
    __m256i r[2];
    for (int k = 0; k < 2; ++k) {
      const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * k));
      const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
      const __m256i hi = _mm256_srli_epi32(u, 16);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
      r[k] = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), is_nan);
    }
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), packed);
  }
  for (; i < n; ++i) y[i] = Fp32ToBf16(x[i]);
}

}  // namespace ferry::kernels::avx2
