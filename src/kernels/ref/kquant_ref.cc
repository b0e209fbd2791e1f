// Reference quantization to q4_K and q6_K, following ggml's quantize_row_q4_K_ref /
// quantize_row_q6_K_ref (make_qkx2_quants / make_qx_quants searches) operation by operation.
// Matches a ggml build without FMA contraction; with contraction ggml's own output varies.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

inline int NearestInt(float f) {
  float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Scale (and min) of an asymmetric n-quant group minimizing weighted squared error.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                     uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric n-quant group (rmse_type 1, no importance weights): L[i] in [0, 2*nmax).
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = -fnmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float lf = static_cast<float>(l);
    sumlx += w * x[i] * lf;
    suml2 += w * lf * lf;
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      const float lf = static_cast<float>(l);
      sumlx += w * x[i] * lf;
      suml2 += w * lf * lf;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

void QuantizeRowQ4_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q4_K*>(dst);
  uint8_t L[kQK_K], Laux[32];
  float weights[32], mins[8], scales[8];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = MakeQkx2Quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    for (int j = 0; j < 8; ++j) {
      uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
      uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
      ls = std::min<uint8_t>(63, ls);
      lm = std::min<uint8_t>(63, lm);
      if (j < 4) {
        y[i].scales[j] = ls;
        y[i].scales[j + 4] = lm;
      } else {
        y[i].scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y[i].scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        y[i].scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    y[i].d = Fp32ToFp16(max_scale / 63.f);
    y[i].dmin = Fp32ToFp16(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      GetScaleMinK4(j, y[i].scales, &sc, &m);
      const float d = Fp16ToFp32(y[i].d) * sc;
      if (d == 0.f) continue;
      const float dm = Fp16ToFp32(y[i].dmin) * m;
      for (int ii = 0; ii < 32; ++ii) {
        const int l = NearestInt((x[32 * j + ii] + dm) / d);
        L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
      }
    }
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void QuantizeRowQ6_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<block_q6_K*>(dst);
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(block_q6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = Fp32ToFp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib)
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * static_cast<float>(y[i].scales[j]);
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace ferry::kernels::ref
