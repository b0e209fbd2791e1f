// Scalar fp16/bf16 <-> fp32 conversions, bit-exact with ggml's reference conversions.
#pragma once

#include <cstdint>
#include <cstring>

namespace ferry {

inline float Fp32FromBits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
inline uint32_t Fp32ToBits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// IEEE half -> float (same algorithm as ggml's ggml_compute_fp16_to_fp32 fallback).
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = Fp32FromBits(0x7800000u);  // 2^-112
  const float normalized = Fp32FromBits((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = Fp32FromBits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? Fp32ToBits(denormalized) : Fp32ToBits(normalized));
  return Fp32FromBits(result);
}

// float -> IEEE half, round to nearest even (ggml_compute_fp32_to_fp16 fallback).
inline uint16_t Fp32ToFp16(float f) {
  const float scale_to_inf = Fp32FromBits(0x77800000u);   // 2^112
  const float scale_to_zero = Fp32FromBits(0x08800000u);  // 2^-110
  float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
  const uint32_t w = Fp32ToBits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = Fp32FromBits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = Fp32ToBits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float Bf16ToFp32(uint16_t h) { return Fp32FromBits(static_cast<uint32_t>(h) << 16); }

// float -> bf16, round to nearest even; NaN stays NaN (ggml_compute_fp32_to_bf16).
inline uint16_t Fp32ToBf16(float f) {
  uint32_t u = Fp32ToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

}  // namespace ferry
