// AVX-512 dots of float-like rows (f32, f16 x f16, bf16 x bf16): four 512-bit accumulators
// over 64 elements a step, then 16 at a time, then one masked load for the ragged tail, so no
// scalar loop remains. The order depends only on n.
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/avx512_util.h"

namespace ferry::kernels::avx512 {
namespace {

// load(p, mask) converts the (masked-in) 16 elements at p to floats; masked-out lanes are 0.
template <typename T, typename Load>
inline float DotFloat16Lanes(const T* a, const T* b, int64_t n, Load load) {
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(load(a + i, kAll), load(b + i, kAll), acc0);
    acc1 = _mm512_fmadd_ps(load(a + i + 16, kAll), load(b + i + 16, kAll), acc1);
    acc2 = _mm512_fmadd_ps(load(a + i + 32, kAll), load(b + i + 32, kAll), acc2);
    acc3 = _mm512_fmadd_ps(load(a + i + 48, kAll), load(b + i + 48, kAll), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(load(a + i, kAll), load(b + i, kAll), acc0);
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(load(a + i, m), load(b + i, m), acc1);
  }
  return HsumF32x16(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

inline __m256i LoadU16(const uint16_t* p, __mmask16 m) {
  return _mm256_maskz_loadu_epi16(m, p);
}

}  // namespace

float DotF32(const void* w, const void* x, int64_t n) {
  return DotFloat16Lanes(static_cast<const float*>(w), static_cast<const float*>(x), n,
                         [](const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); });
}

float DotF16(const void* w, const void* x, int64_t n) {
  return DotFloat16Lanes(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), n,
                         [](const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(LoadU16(p, m)); });
}

float DotBf16(const void* w, const void* x, int64_t n) {
  return DotFloat16Lanes(
      static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), n,
      [](const uint16_t* p, __mmask16 m) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(LoadU16(p, m)), 16));
      });
}

}  // namespace ferry::kernels::avx512
