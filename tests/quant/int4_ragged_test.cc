// Ferry int4 with group sizes 32/64/128 and the ragged last group (core/dtype.h): row sizes,
// quantize/dequantize, pack/unpack round trip, the packed MatMul against a naive reference and
// the SIMD kernel against its scalar twin, and quant/'s clipped quantizer against the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kernels/kernel_test_util.h"
#include "quant/int4_quant.h"

namespace ferry::quant {
namespace {

namespace kt = kernels::testing;

const DType kTypes[] = {DType::kI4G32, DType::kI4G64, DType::kI4G128};
// Whole groups, ragged tails that are and are not multiples of 32, fewer elements than a group.
const int64_t kWidths[] = {256, 172, 64, 100, 300, 20};

std::vector<uint8_t> QuantRows(DType t, const std::vector<float>& w, int64_t n_out, int64_t n_in) {
  const size_t rb = RowBytes(t, n_in);
  std::vector<uint8_t> rows(rb * static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o)
    kernels::QuantizeRow(t, w.data() + o * n_in, rows.data() + o * rb, n_in);
  return rows;
}

TEST(Int4Ragged, RowBytesAndDTypes) {
  EXPECT_EQ(RowBytes(DType::kI4G128, 256), 136u);
  EXPECT_EQ(RowBytes(DType::kI4G128, 172), 68u + 4 + 32);  // 128 + ragged 44 (stored as 64)
  EXPECT_EQ(RowBytes(DType::kI4G32, 172), 5u * 20 + 20);   // 5 groups + ragged 12 (stored as 32)
  EXPECT_EQ(RowBytes(DType::kI4G64, 64), 36u);
  EXPECT_EQ(RowBytesChecked(DType::kI4G128, 64).value(), 36u);
  EXPECT_EQ(static_cast<uint32_t>(DType::kI4G32), 1003u);
  EXPECT_EQ(static_cast<uint32_t>(DType::kI4G64), 1004u);
  EXPECT_EQ(DTypeFromName("int4_g32"), DType::kI4G32);
  EXPECT_EQ(DTypeFromName("INT4_G64"), DType::kI4G64);
  EXPECT_TRUE(kernels::CanPack(DType::kI4G32, 172));
  EXPECT_TRUE(kernels::CanQuantize(DType::kI4G64) && kernels::CanDequantize(DType::kI4G64));
}

TEST(Int4Ragged, QuantizeDequantizeWithinHalfStepAndPaddingIsZeroPoint) {
  std::mt19937 rng(70);
  for (DType t : kTypes) {
    const int64_t g = FerryInt4Group(t);
    for (int64_t n : kWidths) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " n=" + std::to_string(n));
      auto x = kt::RandomFloats(rng, n, 1.f);
      std::vector<uint8_t> q(RowBytes(t, n), 0xEE);
      kernels::QuantizeRow(t, x.data(), q.data(), n);
      std::vector<float> y(static_cast<size_t>(n));
      kernels::DequantizeRow(t, q.data(), y.data(), n);
      for (int64_t g0 = 0; g0 < n; g0 += g) {
        const uint8_t* grp = q.data() + (g0 / g) * (4 + g / 2);
        uint16_t dh;
        std::memcpy(&dh, grp, 2);
        const float d = Fp16ToFp32(dh);
        const int z = grp[2];
        const int64_t len = std::min(g, n - g0);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_LE(std::fabs(x[g0 + i] - y[g0 + i]), 0.5f * d * 1.01f + 1e-6f);
        for (int64_t i = len; i < (len + 31) / 32 * 32; ++i) {  // stored padding quants = z
          const uint8_t byte = grp[4 + 16 * (i / 32) + i % 16];
          ASSERT_EQ((i % 32) < 16 ? (byte & 15) : (byte >> 4), z) << i;
        }
      }
      // quant/'s quantizer without clipping writes the same bytes as the reference.
      std::vector<uint8_t> q2(q.size(), 0x11);
      QuantizeRowInt4Clipped(x.data(), n, g, nullptr, q2.data());
      ASSERT_EQ(q, q2);
      std::vector<float> y2(static_cast<size_t>(n));
      FakeQuantRowInt4(x.data(), n, g, nullptr, y2.data());
      ASSERT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4));
    }
  }
}

TEST(Int4Ragged, PackUnpackRoundTripIsBitExact) {
  std::mt19937 rng(71);
  for (DType t : kTypes) {
    for (int64_t n_in : kWidths) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " n_in=" + std::to_string(n_in));
      const int64_t n_out = 13;
      auto rows = QuantRows(t, kt::RandomFloats(rng, n_out * n_in, 0.1f), n_out, n_in);
      std::vector<uint8_t> packed(kernels::PackedBytes(t, n_out, n_in), 0xAB);
      kernels::PackWeights(t, rows.data(), n_out, n_in, packed.data(), nullptr);
      std::vector<uint8_t> back(rows.size(), 0xCD);
      kernels::UnpackWeights(t, packed.data(), n_out, n_in, back.data());
      ASSERT_EQ(rows, back);
      // Repacking the unpacked rows gives the same packed bytes (pack -> unpack -> pack).
      std::vector<uint8_t> packed2(packed.size(), 0x5A);
      ThreadPool pool(2);
      kernels::PackWeights(t, back.data(), n_out, n_in, packed2.data(), &pool);
      ASSERT_EQ(packed, packed2);
    }
  }
}

TEST(Int4Ragged, PackedMatMulMatchesNaiveAndScalarTwin) {
  ferry::testing::ScopedIsa isa_guard;
  std::mt19937 rng(72);
  for (DType t : kTypes) {
    for (int64_t n_in : kWidths) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " n_in=" + std::to_string(n_in));
      const int64_t n_out = 21, n_tok = 5;
      auto rows = QuantRows(t, kt::RandomFloats(rng, n_out * n_in, 0.1f), n_out, n_in);
      std::vector<uint8_t> packed(kernels::PackedBytes(t, n_out, n_in));
      kernels::PackWeights(t, rows.data(), n_out, n_in, packed.data(), nullptr);
      auto x = kt::RandomFloats(rng, n_tok * n_in);
      std::vector<std::vector<float>> results;
      for (kernels::Isa isa : kt::TestIsas()) {
        ASSERT_TRUE(isa_guard.Set(isa));
        std::vector<float> y(static_cast<size_t>(n_tok * n_out), -1.f);
        kernels::MatMulPacked(packed.data(), t, n_out, n_in, x.data(), n_tok, y.data(), nullptr);
        results.push_back(y);
      }
      for (size_t i = 1; i < results.size(); ++i)
        ASSERT_EQ(0, std::memcmp(results[0].data(), results[i].data(), results[0].size() * 4)) << "ISA " << i;
      // Naive reference: dequantized weights x q8_0-rounded activations (zero-padded to 32).
      const int64_t n_pad = (n_in + 31) / 32 * 32;
      for (int64_t tk = 0; tk < n_tok; ++tk) {
        std::vector<float> xp(static_cast<size_t>(n_pad), 0.f);
        std::copy_n(x.data() + tk * n_in, n_in, xp.data());
        auto xq = kt::ToPartner(DType::kQ8_0, xp.data(), n_pad);
        auto xf = kt::Dequant(DType::kQ8_0, xq.data(), n_pad);
        xf.resize(static_cast<size_t>(n_in));
        for (int64_t o = 0; o < n_out; ++o) {
          std::vector<float> wf(static_cast<size_t>(n_in));
          kernels::DequantizeRow(t, rows.data() + o * RowBytes(t, n_in), wf.data(), n_in);
          double want = 0;
          for (int64_t i = 0; i < n_in; ++i) want += static_cast<double>(wf[i]) * xf[i];
          ASSERT_NEAR(results[0][tk * n_out + o], want, 1e-5 * kt::AbsDot(wf, xf) + 1e-6) << tk << " " << o;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ferry::quant
