// AVX2 elementwise kernels: rmsnorm (double sum of squares, as ggml), softmax, silu*up, add,
// axpy/scale for attention. exp is a Cephes-style polynomial (about 2 ulp).
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::avx2 {
namespace {

inline void AddSquaresPd(__m256 v, __m256d& a0, __m256d& a1) {
  const __m256 sq = _mm256_mul_ps(v, v);
  a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
  a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
}

inline double HsumPd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

inline void AddPd(__m256 v, __m256d& a0, __m256d& a1) {
  a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

}  // namespace

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) AddSquaresPd(_mm256_loadu_ps(x + i), a0, a1);
  double sum = HsumPd(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

// x += delta, then RmsNorm(x) with the very same squares and summation order as RmsNorm, in
// one pass over x for the sum (the second pass hits L1).
void AddRmsNorm(float* x, const float* delta, const float* w, float* y, int64_t n, float eps) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(delta + i));
    _mm256_storeu_ps(x + i, v);
    AddSquaresPd(v, a0, a1);
  }
  double sum = HsumPd(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) {
    x[i] += delta[i];
    sum += static_cast<double>(x[i] * x[i]);
  }
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  __m256 vmax = _mm256_set1_ps(max);
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  max = _mm_cvtss_f32(m4);
  for (; i < n; ++i) max = std::max(max, x[i]);
  const __m256 vm = _mm256_set1_ps(max);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    AddPd(e, a0, a1);
  }
  double sum = HsumPd(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  Scale(x, inv, n);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 neg = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = Exp8(_mm256_xor_ps(g, neg));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kNeg2C = -1.5957691216057308f, kA = 0.044715f;  // as ref::GeluTanhMul
  const __m256 one = _mm256_set1_ps(1.0f), neg2c = _mm256_set1_ps(kNeg2C), a = _mm256_set1_ps(kA);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(a, g), _mm256_mul_ps(g, g), g);  // g + a g^3
    const __m256 e = Exp8(_mm256_mul_ps(neg2c, inner));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(kNeg2C * (g + kA * g * g * g)))) * up[i];
  }
}

void GeluFp16TableMul(const float* gate, const float* up, float* out, int64_t n) {
  const uint16_t* table = ref::GeluFp16Table();
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(g, _MM_FROUND_TO_NEAREST_INT));  // [8] fp16 bits
    // 4-byte gathers at 2-byte steps: the entry is each dword's low half (the table's padding
    // entry keeps entry 65535's read inside it).
    const __m256i e =
        _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), h, 2), low16);
    const __m256i packed =
        _mm256_permute4x64_epi64(_mm256_packus_epi32(e, e), 0x08);  // [8] u16 in the low half
    const __m256 gelu = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    __m256 y =
        _mm256_mul_ps(_mm256_blendv_ps(gelu, g, _mm256_cmp_ps(g, hi, _CMP_GE_OQ)), _mm256_loadu_ps(up + i));
    y = _mm256_andnot_ps(_mm256_cmp_ps(g, lo, _CMP_LE_OQ), y);  // exactly 0 where gate <= -10, as ggml
    _mm256_storeu_ps(out + i, y);
  }
  if (i < n) ref::GeluFp16TableMul(gate + i, up + i, out + i, n - i);
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  const __m256 vinv = _mm256_set1_ps(inv), vcap = _mm256_set1_ps(cap), one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f), neg2 = _mm256_set1_ps(-2.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    // tanh(|t|) = (1 - e) / (1 + e) with e = exp(-2|t|) in (0, 1]: no overflow for any t, and
    // an absolute error of a few 1e-8 where 1 - e cancels (small |t|).
    const __m256 e = Exp8(_mm256_mul_ps(neg2, _mm256_andnot_ps(sign, t)));
    const __m256 th = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    _mm256_storeu_ps(x + i, _mm256_mul_ps(vcap, _mm256_or_ps(th, _mm256_and_ps(sign, t))));
  }
  for (; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void AddInPlace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

void Scale(float* y, float a, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
  for (; i < n; ++i) y[i] *= a;
}

}  // namespace ferry::kernels::avx2
