// Ferry int4 (group-wise asymmetric, kernels/packed_layout.h): round-to-nearest quantization
// from f32 and dequantization. value = (q - z) * d, q and z in [0, 15], one fp16 d and one
// zero per group of G elements (G = 32, 64, 128). When G does not divide n, the last group is
// ragged (core/dtype.h): its r = n mod G elements take the range, and the ceil(r/32)*32 - r
// stored quants past them are z (value 0).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/packed_layout.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {

void QuantizeRowInt4(const float* x, void* dst, int64_t n, int64_t group) {
  auto* out = static_cast<uint8_t*>(dst);
  const size_t gb = internal::Int4GroupBytes(group);
  for (int64_t g0 = 0; g0 < n; g0 += group, x += group, out += gb) {
    const int64_t len = std::min(group, n - g0);  // < group only for a ragged last group
    float mn = x[0], mx = x[0];
    for (int64_t i = 1; i < len; ++i) {
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
    }
    // The grid must contain 0 exactly (z is an integer), as AWQ's zero-point quantizer.
    mn = std::min(mn, 0.f);
    mx = std::max(mx, 0.f);
    const uint16_t dh = Fp32ToFp16((mx - mn) / 15.f);
    const float d = Fp16ToFp32(dh);
    const float id = d > 0.f ? 1.f / d : 0.f;
    const int z = d > 0.f ? std::clamp(static_cast<int>(std::nearbyint(-mn * id)), 0, 15) : 0;
    std::memcpy(out, &dh, 2);
    out[2] = static_cast<uint8_t>(z);
    out[3] = 0;
    uint8_t* qs = out + 4;
    auto q_of = [&](int64_t i) {
      return i < len ? std::clamp(static_cast<int>(std::nearbyint(x[i] * id)) + z, 0, 15) : z;
    };
    for (int64_t k = 0; k < (len + 31) / 32; ++k)
      for (int i = 0; i < 16; ++i)
        qs[16 * k + i] = static_cast<uint8_t>(q_of(32 * k + i) | (q_of(32 * k + 16 + i) << 4));
  }
}

void DequantizeRowInt4(const void* src, float* y, int64_t n, int64_t group) {
  const auto* in = static_cast<const uint8_t*>(src);
  const size_t gb = internal::Int4GroupBytes(group);
  for (int64_t g0 = 0; g0 < n; g0 += group, in += gb, y += group) {
    const int64_t len = std::min(group, n - g0);
    uint16_t dh;
    std::memcpy(&dh, in, 2);
    const float d = Fp16ToFp32(dh);
    const int z = in[2];
    const uint8_t* qs = in + 4;
    for (int64_t i = 0; i < len; ++i) {
      const uint8_t byte = qs[16 * (i / 32) + i % 16];
      const int q = (i % 32) < 16 ? (byte & 0x0F) : (byte >> 4);
      y[i] = static_cast<float>(q - z) * d;
    }
  }
}

}  // namespace ferry::kernels::ref
