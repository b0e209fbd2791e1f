// Dequantization known values, bit-exactness across ISAs, quantization round-trip bounds and
// activation quantizers (AVX2 vs scalar twin, bit-exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"

namespace ferry::kernels {
namespace {

using testing::Dequant;
using testing::RandomFloats;
using testing::RandomRow;

constexpr uint16_t kF16One = 0x3C00, kF16Half = 0x3800, kF16Quarter = 0x3400, kF16MinusOne = 0xBC00;

TEST(Dequantize, F16AndBf16KnownValues) {
  const uint16_t h[4] = {kF16One, 0xC000, 0x0001, 0x7C00};
  float y[4];
  DequantizeRow(DType::kF16, h, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(y[3]));
  const uint16_t b[2] = {0x3F80, 0x4040};
  DequantizeRow(DType::kBF16, b, y, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 3.0f);
}

TEST(Dequantize, Q4_0KnownValues) {
  block_q4_0 b{};
  b.d = kF16Half;
  std::fill(std::begin(b.qs), std::end(b.qs), 0x88);
  b.qs[0] = 0x1F;  // element 0: 15, element 16: 1
  float y[32];
  DequantizeRow(DType::kQ4_0, &b, y, 32);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -3.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[31], 0.0f);
}

TEST(Dequantize, Q4_1KnownValues) {
  block_q4_1 b{};
  b.d = kF16Half;
  b.m = kF16MinusOne;
  b.qs[0] = 0x21;
  float y[32];
  DequantizeRow(DType::kQ4_1, &b, y, 32);
  EXPECT_EQ(y[0], -0.5f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[5], -1.0f);
}

TEST(Dequantize, Q5_0KnownValues) {
  block_q5_0 b{};
  b.d = kF16One;
  const uint32_t qh = 1u | (1u << 16);
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x32;
  float y[32];
  DequantizeRow(DType::kQ5_0, &b, y, 32);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[16], 3.0f);
  EXPECT_EQ(y[1], -16.0f);
  EXPECT_EQ(y[17], -16.0f);
}

TEST(Dequantize, Q5_1KnownValues) {
  block_q5_1 b{};
  b.d = kF16One;
  b.m = kF16Half;
  const uint32_t qh = 1u << 16;
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x0F;
  float y[32];
  DequantizeRow(DType::kQ5_1, &b, y, 32);
  EXPECT_EQ(y[0], 15.5f);
  EXPECT_EQ(y[16], 16.5f);
  EXPECT_EQ(y[3], 0.5f);
}

TEST(Dequantize, Q8_0KnownValues) {
  block_q8_0 b{};
  b.d = kF16Quarter;
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i - 16);
  float y[32];
  DequantizeRow(DType::kQ8_0, &b, y, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], (i - 16) * 0.25f) << i;
}

TEST(Dequantize, Q2_KKnownValues) {
  block_q2_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  b.scales[0] = 0x23;  // scale 3, min 2 for elements 0..15
  b.scales[2] = 0x01;  // elements 32..47
  b.scales[4] = 0x02;  // elements 64..79
  b.scales[6] = 0x11;  // elements 96..111
  b.qs[0] = 0xE4;      // 2-bit fields 0,1,2,3 for elements 0, 32, 64, 96
  float y[256];
  DequantizeRow(DType::kQ2_K, &b, y, 256);
  EXPECT_EQ(y[0], -1.0f);  // 3*0 - 0.5*2
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[32], 1.0f);  // 1*1
  EXPECT_EQ(y[64], 4.0f);  // 2*2
  EXPECT_EQ(y[96], 2.5f);  // 1*3 - 0.5
  EXPECT_EQ(y[128], 0.0f);
}

TEST(Dequantize, Q3_KKnownValues) {
  block_q3_K b{};
  b.d = kF16One;
  // Every 6-bit scale = 33 (value 1): low nibble 1 in bytes 0..7 (both halves), high bits 2.
  std::fill(b.scales, b.scales + 8, 0x11);
  std::fill(b.scales + 8, b.scales + 12, 0xAA);
  b.scales[2] = 0x12;  // scale 2 (elements 32..47) becomes 34 -> 2
  std::fill(std::begin(b.hmask), std::end(b.hmask), 0xFF);
  b.hmask[0] = 0xFE;  // element 0 loses its high bit: q - 4
  b.qs[0] = 0xE4;
  float y[256];
  DequantizeRow(DType::kQ3_K, &b, y, 256);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[32], 2.0f);
  EXPECT_EQ(y[64], 2.0f);
  EXPECT_EQ(y[96], 3.0f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(Dequantize, Q4_KKnownValues) {
  block_q4_K b{};
  b.d = kF16One;
  b.dmin = kF16One;
  b.scales[0] = 2 | (1 << 6);  // scale 0 = 2; top bits of scale 4 = 1
  b.scales[4] = 1;             // min 0 = 1
  b.scales[8] = 0x01;          // low nibble of scale 4 = 1 -> scale 4 = 17, min 4 = 0
  b.qs[0] = 0x53;
  b.qs[64] = 0x04;
  float y[256];
  DequantizeRow(DType::kQ4_K, &b, y, 256);
  EXPECT_EQ(y[0], 5.0f);  // 2*3 - 1
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[32], 0.0f);    // sub-block 1: scale 0, min 0
  EXPECT_EQ(y[128], 68.0f);  // 17*4
}

TEST(Dequantize, Q5_KKnownValues) {
  block_q5_K b{};
  b.d = kF16One;
  b.dmin = kF16One;
  b.scales[0] = 2;
  b.scales[4] = 1;
  b.qs[0] = 0x53;
  b.qh[0] = 0x03;  // element 0 and element 32 get +16
  float y[256];
  DequantizeRow(DType::kQ5_K, &b, y, 256);
  EXPECT_EQ(y[0], 37.0f);  // 2*(3+16) - 1
  EXPECT_EQ(y[32], 0.0f);  // scale 0 for sub-block 1
  EXPECT_EQ(y[1], -1.0f);
}

TEST(Dequantize, Q6_KKnownValues) {
  block_q6_K b{};
  b.d = kF16Half;
  b.scales[0] = -2;
  b.scales[4] = 1;
  b.ql[0] = 0x05;
  b.qh[0] = 0x02;
  float y[256];
  DequantizeRow(DType::kQ6_K, &b, y, 256);
  EXPECT_EQ(y[0], -5.0f);    // 0.5 * -2 * (37 - 32)
  EXPECT_EQ(y[64], -16.0f);  // 0.5 * 1 * (0 - 32)
  EXPECT_EQ(y[16], 0.0f);    // scale 1 = 0
}

TEST(Dequantize, Q8_KKnownValues) {
  block_q8_K b{};
  b.d = 0.5f;
  b.qs[3] = -7;
  float y[256];
  DequantizeRow(DType::kQ8_K, &b, y, 256);
  EXPECT_EQ(y[3], -3.5f);
  EXPECT_EQ(y[0], 0.0f);
}

// DequantizeRow must be bit-identical to ref under every ISA.
TEST(Dequantize, EveryIsaMatchesRefBitExact) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(1);
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                         DType::kQ5_1, DType::kQ8_0, DType::kQ8_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                         DType::kQ5_K, DType::kQ6_K, DType::kQ8_K, DType::kMXFP4};
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (DType t : types) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      ASSERT_TRUE(CanDequantize(t));
      const int64_t n = 512;
      auto row = RandomRow(rng, t, n);
      std::vector<float> want(n), got(n);
      ref::DequantizeRow(t, row.data(), want.data(), n);
      DequantizeRow(t, row.data(), got.data(), n);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), n * sizeof(float)));
    }
  }
}

TEST(Quantize, Q8_0ReferenceRoundsHalfAwayActivationRoundsHalfEven) {
  float x[32] = {127.f, 2.5f, -2.5f, 3.5f};
  block_q8_0 ref_b, act_b;
  QuantizeRow(DType::kQ8_0, x, &ref_b, 32);
  ref::QuantizeActQ8_0(x, &act_b, 32);
  EXPECT_EQ(ref_b.d, kF16One);
  EXPECT_EQ(ref_b.qs[0], 127);
  EXPECT_EQ(ref_b.qs[1], 3);
  EXPECT_EQ(ref_b.qs[2], -3);
  EXPECT_EQ(ref_b.qs[3], 4);
  EXPECT_EQ(act_b.d, kF16One);
  EXPECT_EQ(act_b.qs[1], 2);
  EXPECT_EQ(act_b.qs[2], -2);
  EXPECT_EQ(act_b.qs[3], 4);
}

// MXFP4: the doubled e2m1 table times 2^(e - 128), e < 2 denormal (ggml_e8m0_to_fp32_half).
TEST(Dequantize, Mxfp4KnownValues) {
  block_mxfp4 b{};
  b.e = 127;       // 2^(127 - 128): 0.5 per table unit
  b.qs[0] = 0x7F;  // element 0: code 15 = -12, element 16: code 7 = 12
  b.qs[1] = 0x91;  // element 1: code 1 = 1, element 17: code 9 = -1
  b.qs[2] = 0x08;  // element 2: code 8 = -0 -> 0
  float y[32];
  DequantizeRow(DType::kMXFP4, &b, y, 32);
  EXPECT_EQ(y[0], -6.0f);
  EXPECT_EQ(y[16], 6.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[17], -0.5f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[31], 0.0f);
  b.e = 0;
  DequantizeRow(DType::kMXFP4, &b, y, 32);
  EXPECT_EQ(y[16], 12.0f * std::ldexp(1.0f, -128));  // 2^-128 is a float denormal
  b.e = 1;
  DequantizeRow(DType::kMXFP4, &b, y, 32);
  EXPECT_EQ(y[16], 12.0f * std::ldexp(1.0f, -127));
  b.e = 200;
  DequantizeRow(DType::kMXFP4, &b, y, 32);
  EXPECT_EQ(y[1], std::ldexp(1.0f, 72));  // 1 * 2^(200 - 128)
}

// quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, each value the nearest code, the
// lower code on a tie (ggml scans the table in order, keeping the first minimum).
TEST(Quantize, Mxfp4KnownBlock) {
  float x[32] = {};
  x[0] = 6.0f;    // amax: floor(log2 6) = 2 -> e = 127, d = 2^-1: the grid 0, 0.5, 1, 1.5, 2, 3, 4, 6
  x[1] = -1.3f;   // nearest -1.5: code 11
  x[2] = 0.75f;   // a tie of 0.5 (code 1) and 1 (code 2): the first, code 1
  x[3] = -0.75f;  // a tie of -0.5 (code 9) and -1 (code 10): code 9
  x[16] = 2.9f;   // nearest 3: code 5
  x[17] = -0.1f;  // nearest 0: code 0 (before -0, code 8)
  block_mxfp4 b;
  QuantizeRow(DType::kMXFP4, x, &b, 32);
  EXPECT_EQ(b.e, 127);
  EXPECT_EQ(b.qs[0], 0x57);
  EXPECT_EQ(b.qs[1], 0x0B);
  EXPECT_EQ(b.qs[2], 0x01);
  EXPECT_EQ(b.qs[3], 0x09);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(b.qs[i], 0) << i;
  float y[32];
  DequantizeRow(DType::kMXFP4, &b, y, 32);
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[1], -1.5f);
  EXPECT_EQ(y[16], 3.0f);
  const float zeros[32] = {};
  QuantizeRow(DType::kMXFP4, zeros, &b, 32);
  EXPECT_EQ(b.e, 0);
}

TEST(Quantize, Q4_0KnownBlock) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 16.f;  // max |x| at x[0] = -16
  block_q4_0 b;
  QuantizeRow(DType::kQ4_0, x, &b, 32);
  EXPECT_EQ(Fp16ToFp32(b.d), 2.0f);  // d = -16 / -8
  EXPECT_EQ(b.qs[0] & 0xF, 0);       // -16 / 2 + 8
  EXPECT_EQ(b.qs[0] >> 4, 8);        // x[16] = 0
  EXPECT_EQ(b.qs[15] >> 4, 15);      // x[31] = 15 -> 7.5 + 8.5 = 16 -> clamped 15
}

TEST(Quantize, RoundTripWithinFormatBound) {
  std::mt19937 rng(2);
  const DType types[] = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                         DType::kQ5_1, DType::kQ8_0, DType::kQ8_1, DType::kQ8_K};
  for (DType t : types) {
    SCOPED_TRACE(DTypeName(t));
    ASSERT_TRUE(CanQuantize(t));
    const int64_t n = 1024;
    std::vector<float> x = RandomFloats(rng, n, 3.0f);
    x[7] = 0.f;
    std::vector<uint8_t> q(RowBytes(t, n));
    QuantizeRow(t, x.data(), q.data(), n);
    std::vector<float> y = Dequant(t, q.data(), n);
    const int64_t bs = Traits(t).block_size;
    const int64_t group = bs == 1 ? 1 : bs;
    for (int64_t b0 = 0; b0 < n; b0 += group) {
      float amax = 0, mn = x[b0], mx = x[b0];
      for (int64_t i = b0; i < b0 + group; ++i) {
        amax = std::max(amax, std::fabs(x[i]));
        mn = std::min(mn, x[i]);
        mx = std::max(mx, x[i]);
      }
      for (int64_t i = b0; i < b0 + group; ++i) {
        double bound;
        switch (t) {
          case DType::kF16:
            bound = std::fabs(x[i]) * std::ldexp(1.0, -11);
            break;
          case DType::kBF16:
            bound = std::fabs(x[i]) * std::ldexp(1.0, -8);
            break;
          case DType::kQ4_0:
            bound = 1.02 * amax / 8;
            break;  // clamp at +7 costs up to one step
          case DType::kQ5_0:
            bound = 1.02 * amax / 16;
            break;
          case DType::kQ4_1:
            bound = 0.52 * (mx - mn) / 15 + std::fabs(mn) * 1e-3 + (mx - mn) * 1e-3;
            break;
          case DType::kQ5_1:
            bound = 0.52 * (mx - mn) / 31 + std::fabs(mn) * 1e-3 + (mx - mn) * 1e-3;
            break;
          case DType::kQ8_0:
          case DType::kQ8_1:
            bound = 0.52 * amax / 127 + amax * 1e-3;
            break;
          default:
            bound = 0.501 * amax / 127;
            break;  // q8_K: float scale
        }
        ASSERT_LE(std::fabs(x[i] - y[i]), bound + 1e-7) << "i=" << i;
      }
    }
  }
}

TEST(Quantize, KQuantsRoundTripRelativeError) {
  std::mt19937 rng(5);
  for (DType t : {DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(t));
    ASSERT_TRUE(CanQuantize(t));
    const int64_t n = 4096;
    std::vector<float> x = RandomFloats(rng, n, 0.02f);
    std::fill(x.begin(), x.begin() + 256, 0.f);  // an all-zero super-block stays zero
    std::vector<uint8_t> q(RowBytes(t, n));
    QuantizeRow(t, x.data(), q.data(), n);
    std::vector<float> y = Dequant(t, q.data(), n);
    double err = 0, ref2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      ref2 += x[i] * x[i];
      if (i < 256) {
        ASSERT_EQ(y[i], 0.f);
      }
    }
    const double rel = std::sqrt(err / ref2);
    EXPECT_LT(rel, t == DType::kQ4_K ? 0.12 : 0.03);
    EXPECT_GT(rel, t == DType::kQ4_K ? 0.02 : 0.002);  // it really quantized
    // Quantizing the dequantized values again is a fixed point for q6_K's grid.
    std::vector<uint8_t> q2(q.size());
    QuantizeRow(t, y.data(), q2.data(), n);
    std::vector<float> y2 = Dequant(t, q2.data(), n);
    double drift = 0;
    for (int64_t i = 0; i < n; ++i) drift += (y2[i] - y[i]) * (y2[i] - y[i]);
    EXPECT_LT(std::sqrt(drift / ref2), rel);
  }
}

// MatMul's activation quantizers: every ISA is bit-identical to the scalar twin.
TEST(Quantize, ActivationQuantizersBitExactAcrossIsas) {
  std::mt19937 rng(3);
  const DType acts[] = {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ8_1, DType::kQ8_K};
  const auto& scalar = internal::TableFor(Isa::kScalar);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    for (DType a : acts) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(a));
      for (int rep = 0; rep < 20; ++rep) {
        const int64_t n = 256 * (1 + rep % 3) + (Traits(a).block_size == 1 ? rep : 0);
        std::vector<float> x = RandomFloats(rng, n, rep % 2 ? 0.01f : 5.f);
        if (rep == 3) std::fill(x.begin(), x.begin() + 256, 0.f);  // an all-zero block
        if (rep == 4) x[10] = -x[11] * 100.f;                      // a large negative max
        if (rep == 5)
          for (auto& v : x) v = std::round(v * 4) / 4;  // exact halves after scaling
        std::vector<uint8_t> want(RowBytes(a, n)), got(RowBytes(a, n));
        scalar.quantize_act[static_cast<int>(a)](x.data(), want.data(), n);
        tab.quantize_act[static_cast<int>(a)](x.data(), got.data(), n);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size())) << "rep " << rep;
      }
    }
  }
}

TEST(Quantize, Q8_KBsumsAndScale) {
  std::mt19937 rng(4);
  std::vector<float> x = RandomFloats(rng, 256);
  block_q8_K b;
  QuantizeRow(DType::kQ8_K, x.data(), &b, 256);
  for (int j = 0; j < 16; ++j) {
    int s = 0;
    for (int l = 0; l < 16; ++l) s += b.qs[16 * j + l];
    EXPECT_EQ(b.bsums[j], s);
  }
  int amax_i = 0;
  for (int i = 1; i < 256; ++i)
    if (std::fabs(x[i]) > std::fabs(x[amax_i])) amax_i = i;
  EXPECT_EQ(std::abs(b.qs[amax_i]), 127);
  EXPECT_NEAR(b.d * b.qs[amax_i], x[amax_i], 1e-6f * std::fabs(x[amax_i]));
}

}  // namespace
}  // namespace ferry::kernels
