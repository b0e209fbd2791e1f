// AVX-512 (BW) W8A8 kernels: the int8 activation quantizer on 512 bits, and int8_dot_body.h
// with maddubs + madd (|w| x x negated where w < 0: pairs reach 2 * 128 * 127 < 2^15, exact).
// clang-format off
#include "kernels/x86_intrinsics.h"  // first: before anything that includes immintrin.h
// clang-format on
#include <algorithm>
#include <cmath>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/avx512_util.h"
#include "kernels/int8_dot_body.h"

namespace ferry::kernels::avx512 {
namespace {

struct Avx512Ops {
  using V = __m512i;
  static constexpr int64_t kBytes = 64;
  static constexpr uint32_t kBias = 0;
  static V Zero() { return _mm512_setzero_si512(); }
  static V Load(const int8_t* p) { return _mm512_loadu_si512(p); }
  static V Step(V acc, V w, V x) {
    const V sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return _mm512_add_epi32(
        acc, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), _mm512_set1_epi16(1)));
  }
  static V SumX(V sx, V) { return sx; }  // unused: kBias == 0
  // By vector adds, which wrap: _mm512_reduce_add_epi32 ends in a signed int addition that
  // overflows (undefined) on the longest rows, whose sums are exact modulo 2^32 by design.
  static uint32_t Hsum(V a) {
    return static_cast<uint32_t>(HsumI32x8(_mm256_add_epi32(LoHalf(a), HiHalf(a))));
  }
};

}  // namespace

// Same arithmetic as ref::QuantizeActInt8 (max, one division, multiply, clamp, round half to
// even), 16 lanes at a time: bit-identical.
float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q) {
  float s = static_scale;
  int64_t i = 0;
  if (s <= 0.f) {
    __m512 vmax = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    float amax = _mm512_reduce_max_ps(vmax);
    for (; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    s = amax / 127.f;
  }
  const float inv = s > 0.f ? 1.0f / s : 0.f;
  const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
  for (i = 0; i + 16 <= n; i += 16) {
    __m512 f = _mm512_mul_ps(_mm512_loadu_ps(x + i), vinv);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    const __m512i v = _mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(v));
  }
  for (; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(std::clamp(x[i] * inv, -127.f, 127.f)));
  return s;
}

int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n) {
  return int8_body::DotI8<Avx512Ops>(w, x, n);
}

void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out) {
  int8_body::DotI8x4<Avx512Ops>(w, w_stride, x, n, out);
}

}  // namespace ferry::kernels::avx512
