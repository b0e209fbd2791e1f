// Small AVX-512 helpers shared by the files in kernels/avx512/ and kernels/avx512vnni/ (only
// included by them: ISA flags).
#pragma once

#include "kernels/x86_intrinsics.h"

namespace ferry::kernels::avx512 {

// Sum of 16 floats (halves, then quarters, then within 128 bits).
inline float HsumF32x16(__m512 x) {
  x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(1, 0, 3, 2)));
  x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(2, 3, 0, 1)));
  x = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));
  x = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(x);
}

}  // namespace ferry::kernels::avx512
