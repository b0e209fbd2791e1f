// Scalar dequantization and quantization, bit-exact with ggml's dequantize_row_* and
// quantize_row_*_ref (the expressions keep ggml's operand order so float rounding matches).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {
namespace {

inline float H(fp16_t h) { return Fp16ToFp32(h); }

// Round to nearest (ties to even) via the float magic-number trick; |f| <= 2^22.
inline int NearestInt(float f) {
  float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ---- dequantization -------------------------------------------------------------------
void DeqMXFP4(const block_mxfp4* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = E8M0ToFp32Half(x[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = kMxfp4Values[x[i].qs[j] & 0x0F] * d;
      y[j + 16] = kMxfp4Values[x[i].qs[j] >> 4] * d;
    }
  }
}

void DeqQ4_0(const block_q4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DeqQ4_1(const block_q4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H(x[i].d), m = H(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void DeqQ5_0(const block_q5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[j + 16] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void DeqQ5_1(const block_q5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H(x[i].d), m = H(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | h0) * d + m;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void DeqQ8_0(const block_q8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H(x[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void DeqQ8_1(const block_q8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H(x[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void DeqQ2_K(const block_q2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d), dmin = H(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l)
            *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

// The 16 signed 6-bit scales of a q3_K block (already minus 32).
void Q3KScales(const uint8_t* packed, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

void DeqQ3_K(const block_q3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = H(x[i].d);
    int8_t scales[16];
    Q3KScales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(scales[is++]);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
  }
}

void DeqQ4_K(const block_q4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d), dmin = H(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      GetScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void DeqQ5_K(const block_q5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d), dmin = H(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32) {
      uint8_t sc, m;
      GetScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

void DeqQ6_K(const block_q6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void DeqQ8_K(const block_q8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K)
    for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
}

// ---- reference quantization -------------------------------------------------------------
// Signed value of largest magnitude (first one on ties), as ggml's q4_0/q5_0 pick `max`.
inline float SignedAbsMax(const float* x, int n, float* amax_out) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax_out) *amax_out = amax;
  return max;
}

void QuantQ4_0(const float* x, block_q4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const float max = SignedAbsMax(x, 32, nullptr);
    const float d = max / -8;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[j] * id, x1 = x[j + 16] * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void MinMax(const float* x, int n, float* mn, float* mx) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *mn = lo;
  *mx = hi;
}

void QuantQ4_1(const float* x, block_q4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float min, max;
    MinMax(x, 32, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[j + 16] - min) * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void QuantQ5_0(const float* x, block_q5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const float max = SignedAbsMax(x, 32, nullptr);
    const float d = max / -16;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[j] * id, x1 = x[j + 16] * id;
      const uint32_t xi0 = static_cast<uint32_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x0 + 16.5f))));
      const uint32_t xi1 = static_cast<uint32_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x1 + 16.5f))));
      y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void QuantQ5_1(const float* x, block_q5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float min, max;
    MinMax(x, 32, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[j + 16] - min) * id;
      const uint32_t xi0 = static_cast<uint8_t>(x0 + 0.5f);
      const uint32_t xi1 = static_cast<uint8_t>(x1 + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void QuantQ8_0(const float* x, block_q8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void QuantQ8_1(const float* x, block_q8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = Fp32ToFp16(static_cast<float>(sum) * d);
  }
}

}  // namespace

void QuantizeActQ8_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float amax = 0.f;
    const float max = SignedAbsMax(x, kQK_K, &amax);
    if (amax == 0.f) {
      y[i].d = 0.f;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[i].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

namespace {
// One 32-block of llama.cpp's x86 q8 activation quantizer; returns the int sum of the quants.
int ActBlockQ8(const float* x, fp16_t* d_out, int8_t* qs, float* d_f32) {
  float amax = 0.f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  *d_out = Fp32ToFp16(d);
  *d_f32 = d;
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    float r = std::nearbyint(x[j] * id);  // default rounding: ties to even
    r = std::min(127.f, std::max(-128.f, r));
    qs[j] = static_cast<int8_t>(r);
    sum += qs[j];
  }
  return sum;
}
}  // namespace

void QuantizeActQ8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  float d;
  for (int64_t i = 0; i < n / 32; ++i) ActBlockQ8(x + 32 * i, &y[i].d, y[i].qs, &d);
}

void QuantizeActQ8_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / 32; ++i) {
    float d;
    const int sum = ActBlockQ8(x + 32 * i, &y[i].d, y[i].qs, &d);
    y[i].s = Fp32ToFp16(d * static_cast<float>(sum));
  }
}

// Stored by memcpy: dst may be any byte address (a KV row in a padded or packed buffer).
void QuantizeActF16(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Fp32ToFp16(x[i]);
    std::memcpy(y + 2 * i, &h, 2);
  }
}

void QuantizeActBf16(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Fp32ToBf16(x[i]);
    std::memcpy(y + 2 * i, &h, 2);
  }
}

// quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (so amax lands in the table's top
// octave), then each value the nearest of the 16 codes (the first on ties, as ggml's scan).
void QuantMXFP4(const float* x, block_mxfp4* y, int64_t nb) {
  auto best = [](float v, float d) {
    int idx = 0;
    float err = std::fabs(kMxfp4Values[0] * d - v);
    for (int k = 1; k < 16; ++k) {
      const float e = std::fabs(kMxfp4Values[k] * d - v);
      if (e < err) {
        idx = k;
        err = e;
      }
    }
    return static_cast<uint8_t>(idx);
  };
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // Clamped to the e8m0 range (ggml casts blocks under 2^-125 to uint8 out of range).
    const float ef = amax > 0.f ? std::floor(std::log2(amax)) - 2 + 127 : 0.f;
    const auto e = static_cast<uint8_t>(std::clamp(ef, 0.f, 254.f));
    const float d = E8M0ToFp32Half(e);
    y[i].e = e;
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(best(x[j], d) | (best(x[j + 16], d) << 4));
  }
}

bool CanDequantize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ4_0:
    case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0:
    case DType::kQ8_1: case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K:
    case DType::kQ5_K: case DType::kQ6_K: case DType::kQ8_K: case DType::kI4G128:
    case DType::kI4G32:
    case DType::kI4G64:
    case DType::kMXFP4:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / Traits(t).block_size;
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
      break;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      break;
    }
    case DType::kQ4_0: DeqQ4_0(static_cast<const block_q4_0*>(src), dst, nb); break;
    case DType::kQ4_1: DeqQ4_1(static_cast<const block_q4_1*>(src), dst, nb); break;
    case DType::kQ5_0: DeqQ5_0(static_cast<const block_q5_0*>(src), dst, nb); break;
    case DType::kQ5_1: DeqQ5_1(static_cast<const block_q5_1*>(src), dst, nb); break;
    case DType::kQ8_0: DeqQ8_0(static_cast<const block_q8_0*>(src), dst, nb); break;
    case DType::kQ8_1: DeqQ8_1(static_cast<const block_q8_1*>(src), dst, nb); break;
    case DType::kQ2_K: DeqQ2_K(static_cast<const block_q2_K*>(src), dst, nb); break;
    case DType::kQ3_K: DeqQ3_K(static_cast<const block_q3_K*>(src), dst, nb); break;
    case DType::kQ4_K: DeqQ4_K(static_cast<const block_q4_K*>(src), dst, nb); break;
    case DType::kQ5_K: DeqQ5_K(static_cast<const block_q5_K*>(src), dst, nb); break;
    case DType::kQ6_K: DeqQ6_K(static_cast<const block_q6_K*>(src), dst, nb); break;
    case DType::kQ8_K: DeqQ8_K(static_cast<const block_q8_K*>(src), dst, nb); break;
    case DType::kMXFP4:
      DeqMXFP4(static_cast<const block_mxfp4*>(src), dst, nb);
      break;
    case DType::kI4G128: case DType::kI4G32: case DType::kI4G64: DequantizeRowInt4(src, dst, n, FerryInt4Group(t)); break;
    default: break;  // callers check CanDequantize
  }
}

bool CanQuantize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ4_0:
    case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0:
    case DType::kQ8_1: case DType::kQ8_K: case DType::kQ4_K: case DType::kQ6_K: case DType::kI4G128:
    case DType::kI4G32:
    case DType::kI4G64:
    case DType::kMXFP4:
      return true;
    default:
      return false;
  }
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / Traits(t).block_size;
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case DType::kF16: QuantizeActF16(src, dst, n); break;
    case DType::kBF16: QuantizeActBf16(src, dst, n); break;
    case DType::kQ4_0: QuantQ4_0(src, static_cast<block_q4_0*>(dst), nb); break;
    case DType::kQ4_1: QuantQ4_1(src, static_cast<block_q4_1*>(dst), nb); break;
    case DType::kQ5_0: QuantQ5_0(src, static_cast<block_q5_0*>(dst), nb); break;
    case DType::kQ5_1: QuantQ5_1(src, static_cast<block_q5_1*>(dst), nb); break;
    case DType::kQ8_0: QuantQ8_0(src, static_cast<block_q8_0*>(dst), nb); break;
    case DType::kQ8_1: QuantQ8_1(src, static_cast<block_q8_1*>(dst), nb); break;
    case DType::kQ8_K: QuantizeActQ8_K(src, dst, n); break;
    case DType::kQ4_K: QuantizeRowQ4_K(src, dst, n); break;
    case DType::kQ6_K: QuantizeRowQ6_K(src, dst, n); break;
    case DType::kMXFP4:
      QuantMXFP4(src, static_cast<block_mxfp4*>(dst), nb);
      break;
    case DType::kI4G128: case DType::kI4G32: case DType::kI4G64: QuantizeRowInt4(src, dst, n, FerryInt4Group(t)); break;
    default: break;  // callers check CanQuantize
  }
}

}  // namespace ferry::kernels::ref
