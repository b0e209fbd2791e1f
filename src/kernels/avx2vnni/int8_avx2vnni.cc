// AVX-VNNI W8A8 dots: int8_dot_body.h with 256-bit vpdpbusd (weights offset to w + 128).
#include <immintrin.h>

#include "kernels/avx2vnni/avx2vnni.h"
#include "kernels/int8_dot_body.h"

namespace ferry::kernels::avx2vnni {
namespace {

struct VnniOps {
  using V = __m256i;
  static constexpr int64_t kBytes = 32;
  static constexpr uint32_t kBias = 128;
  static V Zero() { return _mm256_setzero_si256(); }
  static V Load(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static V Step(V acc, V w, V x) {
    return _mm256_dpbusd_avx_epi32(acc, _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), x);
  }
  static V SumX(V sx, V x) { return _mm256_dpbusd_avx_epi32(sx, _mm256_set1_epi8(1), x); }
  static uint32_t Hsum(V a) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return static_cast<uint32_t>(_mm_cvtsi128_si32(s));
  }
};

}  // namespace

int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n) {
  return int8_body::DotI8<VnniOps>(w, x, n);
}

void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out) {
  int8_body::DotI8x4<VnniOps>(w, w_stride, x, n, out);
}

}  // namespace ferry::kernels::avx2vnni
