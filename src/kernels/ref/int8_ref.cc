// Scalar truth for the W8A8 path: int8 activation quantization and the int8 x int8 dot.
#include <algorithm>
#include <cmath>

#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {

float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q) {
  float s = static_scale;
  if (s <= 0.f) {
    float amax = 0.f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    s = amax / 127.f;
  }
  const float inv = s > 0.f ? 1.0f / s : 0.f;
  // Clamp before rounding (a static scale may be exceeded); nearbyint rounds half to even,
  // as the SIMD round instructions do.
  for (int64_t i = 0; i < n; ++i)
    q[i] = static_cast<int8_t>(std::nearbyint(std::clamp(x[i] * inv, -127.f, 127.f)));
  return s;
}

int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n) {
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<int32_t>(w[i]) * static_cast<int32_t>(x[i]);
  return sum;
}

void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out) {
  for (int r = 0; r < 4; ++r) out[r] = DotI8(w + r * w_stride, x, n);
}

}  // namespace ferry::kernels::ref
