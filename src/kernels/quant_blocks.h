// Quantized block layouts, byte-for-byte identical to ggml-common.h so GGUF tensors are read in
// place. Every field is 1- or 2-byte aligned (q8_K: 4), so the natural layout already has no
// padding; the static_asserts pin the sizes to ggml's.
#pragma once

#include <cstdint>

namespace ferry::kernels {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK_K = 256;  // k-quant super-block
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales+mins of q4_K/q5_K

using fp16_t = uint16_t;  // IEEE half bits

struct block_q4_0 {
  fp16_t d;              // scale
  uint8_t qs[kQK4_0 / 2];  // nibbles: low = elements 0..15, high = 16..31; value = (q - 8) * d
};
static_assert(sizeof(block_q4_0) == 18, "q4_0 block size");

struct block_q4_1 {
  fp16_t d;  // scale
  fp16_t m;  // min; value = q * d + m
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20, "q4_1 block size");

struct block_q5_0 {
  fp16_t d;
  uint8_t qh[4];  // 5th bit of each of the 32 elements (little-endian uint32)
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22, "q5_0 block size");

struct block_q5_1 {
  fp16_t d;
  fp16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24, "q5_1 block size");

struct block_q8_0 {
  fp16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "q8_0 block size");

struct block_q8_1 {
  fp16_t d;
  fp16_t s;  // d * sum(qs)
  int8_t qs[kQK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "q8_1 block size");

// 2-bit k-quant: 16 sub-blocks of 16; scales[j] = scale (low nibble) | min (high nibble).
// value = d * (sc & 15) * q - dmin * (sc >> 4)
struct block_q2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  fp16_t d;
  fp16_t dmin;
};
static_assert(sizeof(block_q2_K) == 84, "q2_K block size");

// 3-bit k-quant: 16 sub-blocks of 16 with signed 6-bit scales (packed in 12 bytes, offset 32).
struct block_q3_K {
  uint8_t hmask[kQK_K / 8];  // high bit of each quant
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];
  fp16_t d;
};
static_assert(sizeof(block_q3_K) == 110, "q3_K block size");

// 4-bit k-quant: 8 sub-blocks of 32 with 6-bit scales and mins. value = d*sc*q - dmin*m
struct block_q4_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144, "q4_K block size");

struct block_q5_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(block_q5_K) == 176, "q5_K block size");

// 6-bit k-quant: 16 sub-blocks of 16 with int8 scales. value = d * sc * (q - 32)
struct block_q6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  fp16_t d;
};
static_assert(sizeof(block_q6_K) == 210, "q6_K block size");

// Activation partner of the k-quants: float scale, int8 quants, sums of each 16 quants.
struct block_q8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(block_q8_K) == 292, "q8_K block size");

// MXFP4 (OCP microscaling, ggml's block_mxfp4): 32 e2m1 values sharing one e8m0 exponent.
// qs nibbles as q4_0's (low = elements 0..15, high = 16..31); value = kMxfp4Values[q] *
// E8M0ToFp32Half(e), the table holding twice each e2m1 value so it is an exact int8.
inline constexpr int kQK_MXFP4 = 32;
struct block_mxfp4 {
  uint8_t e;  // e8m0: 2^(e - 127)
  uint8_t qs[kQK_MXFP4 / 2];
};
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block size");
// e2m1 code -> 2 * value: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6 (ggml's kvalues_mxfp4).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128): half the e8m0 scale, compensating the doubled table (ggml_e8m0_to_fp32_half,
// whose e < 2 are the denormals 2^-128 and 2^-127). e = 255 (NaN in the spec) gives 2^127.
inline float E8M0ToFp32Half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a q4_K/q5_K block.
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Unpacks q4_K/q5_K's 12 scale bytes into utmp[0..1] = 8 scales, utmp[2..3] = 8 mins (the
// 6-bit values as bytes; ggml's order). Internal linkage: the ISA-flagged kernels inline it.
namespace {
inline void UnpackK4Scales(const uint8_t* scales, uint32_t utmp[4]) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  __builtin_memcpy(utmp, scales, 12);
  utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
  const uint32_t uaux = utmp[1] & kmask1;
  utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
  utmp[2] = uaux;
  utmp[0] &= kmask1;
}
}  // namespace

}  // namespace ferry::kernels
