// Helpers for kernel tests: ISA loops, random rows of any weight type, data-derived tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "isa_guard.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::testing {

using ferry::testing::ScopedIsa;
using ferry::testing::TestIsas;

inline std::vector<float> RandomFloats(std::mt19937& rng, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

inline uint16_t RandomScaleF16(std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  return Fp32ToFp16(d(rng));
}

// A random weight row of type t with n elements: quantized from Gaussian data for the 32-blocks
// and float types, random bytes with sane fp16 scales for the k-quants (covers every bit
// pattern, including extreme scales and quants).
inline std::vector<uint8_t> RandomRow(std::mt19937& rng, DType t, int64_t n) {
  std::vector<uint8_t> row(RowBytes(t, n));
  if (ref::CanQuantize(t) && Traits(t).block_size != kQK_K) {
    std::vector<float> x = RandomFloats(rng, n);
    ref::QuantizeRow(t, x.data(), row.data(), n);
    return row;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    switch (t) {
      case DType::kQ2_K: {
        auto* b = reinterpret_cast<block_q2_K*>(row.data()) + i;
        b->d = RandomScaleF16(rng, 0.001f, 0.02f);
        b->dmin = RandomScaleF16(rng, 0.001f, 0.02f);
        break;
      }
      case DType::kQ3_K:
        reinterpret_cast<block_q3_K*>(row.data())[i].d = RandomScaleF16(rng, 0.001f, 0.02f);
        break;
      case DType::kQ4_K: {
        auto* b = reinterpret_cast<block_q4_K*>(row.data()) + i;
        b->d = RandomScaleF16(rng, 0.0005f, 0.005f);
        b->dmin = RandomScaleF16(rng, 0.0005f, 0.005f);
        break;
      }
      case DType::kQ5_K: {
        auto* b = reinterpret_cast<block_q5_K*>(row.data()) + i;
        b->d = RandomScaleF16(rng, 0.0005f, 0.005f);
        b->dmin = RandomScaleF16(rng, 0.0005f, 0.005f);
        break;
      }
      case DType::kQ6_K:
        reinterpret_cast<block_q6_K*>(row.data())[i].d = RandomScaleF16(rng, 0.0005f, 0.005f);
        break;
      default:
        break;
    }
  }
  return row;
}

// Converts an f32 activation row to MatMul's partner row (blocks plus float scale copies)
// with the scalar quantizers (every ISA's are bit-identical to them, see quant_test).
inline std::vector<uint8_t> ToPartner(DType w_type, const float* x, int64_t n) {
  const DType act = MatMulActivationType(w_type);
  if (act == DType::kF32) {
    std::vector<uint8_t> out(static_cast<size_t>(n) * 4);
    std::memcpy(out.data(), x, out.size());
    return out;
  }
  std::vector<uint8_t> out(internal::ActRowBytes(act, n));
  internal::PrepareActRow(internal::TableFor(Isa::kScalar), act, x, out.data(), n);
  return out;
}

inline std::vector<float> Dequant(DType t, const void* src, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  ref::DequantizeRow(t, src, y.data(), n);
  return y;
}

// sum |a_i * b_i|: the scale of a dot product's rounding error.
inline double AbsDot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

// Weight types MatMul supports (and their dot products are tested).
inline const std::vector<DType>& MatMulTypes() {
  static const std::vector<DType> v = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                                       DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                                       DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kMXFP4};
  return v;
}

// Extra tolerance for types whose partner stores the block sum s as fp16 (q4_1, q5_1 x q8_1).
inline bool UsesQ8_1(DType t) {
  return t == DType::kQ4_1 || t == DType::kQ5_1;
}

}  // namespace ferry::kernels::testing
