// Scalar dot products of a weight row with its partner activation row (llama.cpp pairing:
// q4_0/q5_0/q8_0 x q8_0, q4_1/q5_1 x q8_1, k-quants x q8_K, f16 x f16, bf16 x bf16).
// Block-internal sums are exact integers; the float accumulation is in double (truth), except
// q4_0 / q8_0 / q4_K / q5_K / q6_K, which follow the packed kernels' float order (below).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {
namespace {

inline float H(fp16_t h) { return Fp16ToFp32(h); }

// Integer dot of 16 quants with 16 activations.
inline int Dot16(const int8_t* a, const int8_t* b) {
  int s = 0;
  for (int l = 0; l < 16; ++l) s += a[l] * b[l];
  return s;
}

// Decodes a q2_K block's quants into q[256] (0..3).
void DecodeQ2K(const block_q2_K& b, int8_t* q) {
  for (int n = 0; n < kQK_K; n += 128)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) q[n + 32 * j + l] = static_cast<int8_t>((b.qs[n / 4 + l] >> (2 * j)) & 3);
}

void DecodeQ3K(const block_q3_K& b, int8_t* q) {
  for (int n = 0; n < kQK_K; n += 128)
    for (int j = 0; j < 4; ++j) {
      const int m = 1 << ((n / 128) * 4 + j);
      for (int l = 0; l < 32; ++l)
        q[n + 32 * j + l] = static_cast<int8_t>(((b.qs[n / 4 + l] >> (2 * j)) & 3) - ((b.hmask[l] & m) ? 0 : 4));
    }
}

void DecodeQ4K(const block_q4_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>(b.qs[32 * c + l] & 0xF);
      q[64 * c + 32 + l] = static_cast<int8_t>(b.qs[32 * c + l] >> 4);
    }
}

void DecodeQ5K(const block_q5_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>((b.qs[32 * c + l] & 0xF) + ((b.qh[l] >> (2 * c)) & 1) * 16);
      q[64 * c + 32 + l] = static_cast<int8_t>((b.qs[32 * c + l] >> 4) + ((b.qh[l] >> (2 * c + 1)) & 1) * 16);
    }
}

void DecodeQ6K(const block_q6_K& b, int8_t* q) {
  for (int nc = 0; nc < 2; ++nc) {
    const uint8_t* ql = b.ql + 64 * nc;
    const uint8_t* qh = b.qh + 32 * nc;
    int8_t* o = q + 128 * nc;
    for (int l = 0; l < 32; ++l) {
      o[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

void Q3KScales(const uint8_t* packed, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

}  // namespace

float DotF32(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

float DotF16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(Fp16ToFp32(a[i])) * Fp16ToFp32(b[i]);
  return static_cast<float>(s);
}

float DotBf16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(Bf16ToFp32(a[i])) * Bf16ToFp32(b[i]);
  return static_cast<float>(s);
}

// q4_0 and q8_0 follow ref::PackedTile's order exactly (an exact int32 sum per block, then
// acc = fma(d_w * d_x, float(isum), acc) into one float), so an in-place MatMul gives the bits
// of the repacked one.
float DotQ4_0(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q4_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  float acc = 0.f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += ((a[i].qs[j] & 0x0F) - 8) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
    }
    acc = std::fma(H(a[i].d) * H(b[i].d), static_cast<float>(sumi), acc);
  }
  return acc;
}

float DotQ4_1(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q4_1*>(w);
  const auto* b = static_cast<const block_q8_1*>(x);
  double s = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += (a[i].qs[j] & 0x0F) * b[i].qs[j];
      sumi += (a[i].qs[j] >> 4) * b[i].qs[j + 16];
    }
    s += static_cast<double>(sumi) * (H(a[i].d) * H(b[i].d)) + static_cast<double>(H(a[i].m)) * H(b[i].s);
  }
  return static_cast<float>(s);
}

float DotQ5_0(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q5_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  double s = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, a[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
      sumi += (((a[i].qs[j] & 0x0F) | (h0 << 4)) - 16) * b[i].qs[j];
      sumi += (((a[i].qs[j] >> 4) | (h1 << 4)) - 16) * b[i].qs[j + 16];
    }
    s += static_cast<double>(sumi) * (H(a[i].d) * H(b[i].d));
  }
  return static_cast<float>(s);
}

float DotQ5_1(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q5_1*>(w);
  const auto* b = static_cast<const block_q8_1*>(x);
  double s = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, a[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
      sumi += ((a[i].qs[j] & 0x0F) | (h0 << 4)) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) | (h1 << 4)) * b[i].qs[j + 16];
    }
    s += static_cast<double>(sumi) * (H(a[i].d) * H(b[i].d)) + static_cast<double>(H(a[i].m)) * H(b[i].s);
  }
  return static_cast<float>(s);
}

float DotQ8_0(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q8_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  float acc = 0.f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += a[i].qs[j] * b[i].qs[j];
    acc = std::fma(H(a[i].d) * H(b[i].d), static_cast<float>(sumi), acc);
  }
  return acc;
}

// MXFP4 in q4_0's order: the block's exact int32 sum of (2 * e2m1 value) * q, then
// acc = fma(2^(e-128) * d_x, float(isum), acc) into one float.
float DotMXFP4(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_mxfp4*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  float acc = 0.f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += kMxfp4Values[a[i].qs[j] & 0x0F] * b[i].qs[j];
      sumi += kMxfp4Values[a[i].qs[j] >> 4] * b[i].qs[j + 16];
    }
    acc = std::fma(E8M0ToFp32Half(a[i].e) * H(b[i].d), static_cast<float>(sumi), acc);
  }
  return acc;
}

float DotQ2_K(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q2_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  double s = 0;
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    DecodeQ2K(a[i], q);
    int isum = 0, summs = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (a[i].scales[j] & 0xF) * Dot16(q + 16 * j, b[i].qs + 16 * j);
      summs += (a[i].scales[j] >> 4) * b[i].bsums[j];
    }
    const float dall = b[i].d * H(a[i].d), dmin = b[i].d * H(a[i].dmin);
    s += static_cast<double>(dall) * isum - static_cast<double>(dmin) * summs;
  }
  return static_cast<float>(s);
}

float DotQ3_K(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q3_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  double s = 0;
  int8_t q[kQK_K], sc[16];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    DecodeQ3K(a[i], q);
    Q3KScales(a[i].scales, sc);
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += sc[j] * Dot16(q + 16 * j, b[i].qs + 16 * j);
    s += static_cast<double>(H(a[i].d) * b[i].d) * isum;
  }
  return static_cast<float>(s);
}

namespace {
// Shared by q4_K and q5_K: q holds the unsigned quants, 8 sub-blocks of 32 with 6-bit scales.
// The exact integer sums, then the float chain every table and layout uses (ref::PackedTile):
// acc = fma(d_x * d, S, acc); acc = fma(-(d_x * dmin), M, acc).
float DotK4Like(const uint8_t* scales, fp16_t d, fp16_t dmin, const int8_t* q, const block_q8_K& b,
                float acc) {
  int isum = 0, summs = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    GetScaleMinK4(j, scales, &sc, &m);
    isum += sc * (Dot16(q + 32 * j, b.qs + 32 * j) + Dot16(q + 32 * j + 16, b.qs + 32 * j + 16));
    summs += m * (b.bsums[2 * j] + b.bsums[2 * j + 1]);
  }
  acc = std::fma(b.d * H(d), static_cast<float>(isum), acc);
  return std::fma(-(b.d * H(dmin)), static_cast<float>(summs), acc);
}
}  // namespace

namespace {
// q4_K and q5_K share scales/mins and the q8_K pairing; only the quant decoding differs.
template <typename Block, void (*Decode)(const Block&, int8_t*)>
float DotK4Family(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const Block*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float acc = 0.f;
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(a[i], q);
    acc = DotK4Like(a[i].scales, a[i].d, a[i].dmin, q, b[i], acc);
  }
  return acc;
}
}  // namespace

float DotQ4_K(const void* w, const void* x, int64_t n) { return DotK4Family<block_q4_K, DecodeQ4K>(w, x, n); }
float DotQ5_K(const void* w, const void* x, int64_t n) { return DotK4Family<block_q5_K, DecodeQ5K>(w, x, n); }

float DotQ6_K(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const block_q6_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float acc = 0.f;  // the exact S per super-block, then the chain of ref::PackedTile (packed q6_K)
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    DecodeQ6K(a[i], q);
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += a[i].scales[j] * Dot16(q + 16 * j, b[i].qs + 16 * j);
    acc = std::fma(b[i].d * H(a[i].d), static_cast<float>(isum), acc);
  }
  return acc;
}

float DotF32Plain(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void Scale(float* y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

}  // namespace ferry::kernels::ref
