// Dot products: ref against dequantized floats (so ref itself can fail) and every ISA
// against ref, on random data and lengths (ragged tails for the float types).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"

namespace ferry::kernels {
namespace {

using testing::AbsDot;
using testing::Dequant;
using testing::MatMulTypes;
using testing::RandomFloats;
using testing::RandomRow;
using testing::ToPartner;

int64_t RandomLength(std::mt19937& rng, DType t) {
  const int64_t bs = Traits(t).block_size;
  if (bs == 1) return std::uniform_int_distribution<int64_t>(1, 300)(rng);
  return bs * std::uniform_int_distribution<int64_t>(1, bs == 256 ? 6 : 40)(rng);
}

TEST(Dot, RefMatchesDequantizedProduct) {
  std::mt19937 rng(10);
  const auto& scalar = internal::TableFor(Isa::kScalar);
  for (DType t : MatMulTypes()) {
    SCOPED_TRACE(DTypeName(t));
    for (int rep = 0; rep < 30; ++rep) {
      const int64_t n = RandomLength(rng, t);
      auto w = RandomRow(rng, t, n);
      auto x = RandomFloats(rng, n);
      auto xq = ToPartner(t, x.data(), n);
      auto wf = Dequant(t, w.data(), n);
      auto xf = Dequant(MatMulActivationType(t), xq.data(), n);
      double want = 0;
      for (int64_t i = 0; i < n; ++i) want += static_cast<double>(wf[i]) * xf[i];
      const double s = AbsDot(wf, xf);
      // q8_1 keeps d*sum(q) as fp16: the min term carries that rounding.
      const double tol = (testing::UsesQ8_1(t) ? 2e-3 : 1e-5) * s + 1e-6;
      const float got = scalar.dot[static_cast<int>(t)](w.data(), xq.data(), n);
      ASSERT_NEAR(got, want, tol) << "n=" << n;
    }
  }
}

TEST(Dot, EveryIsaMatchesRef) {
  std::mt19937 rng(11);
  const auto& scalar = internal::TableFor(Isa::kScalar);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    for (DType t : MatMulTypes()) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      ASSERT_NE(tab.dot[static_cast<int>(t)], nullptr);
      for (int rep = 0; rep < 50; ++rep) {
        const int64_t n = RandomLength(rng, t);
        auto w = RandomRow(rng, t, n);
        auto x = RandomFloats(rng, n, rep % 3 == 0 ? 100.f : 1.f);
        auto xq = ToPartner(t, x.data(), n);
        auto wf = Dequant(t, w.data(), n);
        auto xf = Dequant(MatMulActivationType(t), xq.data(), n);
        const double s = AbsDot(wf, xf);
        const float want = scalar.dot[static_cast<int>(t)](w.data(), xq.data(), n);
        const float got = tab.dot[static_cast<int>(t)](w.data(), xq.data(), n);
        ASSERT_NEAR(got, want, 2e-6 * s + 1e-6 * std::fabs(want) + 1e-30) << "n=" << n;
      }
    }
  }
}

// A tiled dot (one weight row, up to kMaxDotTile activation rows) gives each token the same
// bits as the table's single dot, at every tile size and position in the tile.
TEST(Dot, TilesEqualSingleDotsBitExact) {
  std::mt19937 rng(13);
  int tested = 0;
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    for (DType t : MatMulTypes()) {
      const internal::DotTileFn tile = tab.dot_tile[static_cast<int>(t)];
      if (!tile) continue;
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      ++tested;
      for (int rep = 0; rep < 20; ++rep) {
        const int64_t n = RandomLength(rng, t);
        auto w = RandomRow(rng, t, n);
        std::vector<std::vector<uint8_t>> xq;
        for (int i = 0; i < internal::kMaxDotTile; ++i) {
          auto x = RandomFloats(rng, n, i == 1 ? 100.f : 1.f);
          xq.push_back(ToPartner(t, x.data(), n));
        }
        for (int nt = 1; nt <= internal::kMaxDotTile; ++nt) {
          const void* xs[internal::kMaxDotTile];
          float out[internal::kMaxDotTile];
          for (int i = 0; i < nt; ++i) xs[i] = xq[static_cast<size_t>(i)].data();
          tile(w.data(), xs, nt, n, out);
          for (int i = 0; i < nt; ++i) {
            const float single = tab.dot[static_cast<int>(t)](w.data(), xs[i], n);
            ASSERT_EQ(std::memcmp(&out[i], &single, 4), 0) << "n=" << n << " nt=" << nt << " token " << i;
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no ISA on this CPU has tiled dots";
}

// q4_0 / q8_0 / q4_K / q5_K / q6_K follow the packed kernels' order (an exact int32 per block or
// super-block, then one fma chain), so every table's in-place dot gives the scalar twin's bits,
// for block counts on both sides of the eight-block batches.
TEST(Dot, PackedOrderTypesEqualScalarTwinBitExact) {
  std::mt19937 rng(14);
  const auto& scalar = internal::TableFor(Isa::kScalar);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kMXFP4, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      for (int64_t nb : {1, 7, 8, 9, 16, 23, 64}) {
        const int64_t n = Traits(t).block_size * nb;
        auto w = RandomRow(rng, t, n);
        auto x = RandomFloats(rng, n, nb % 2 ? 1.f : 100.f);
        auto xq = ToPartner(t, x.data(), n);
        const float want = scalar.dot[static_cast<int>(t)](w.data(), xq.data(), n);
        const float got = tab.dot[static_cast<int>(t)](w.data(), xq.data(), n);
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "nb=" << nb << " got " << got << " want " << want;
      }
    }
  }
}

// The VNNI tables run the K-quant bodies of the table they extend with a fused MAC: the same
// integers and float operations, so the same bits (avx2vnni = avx2, avx512vnni = avx512).
TEST(Dot, VnniTablesGiveTheirBaseTablesBits) {
  std::mt19937 rng(15);
  int tested = 0;
  for (auto [vnni, base] :
       {std::pair{Isa::kAvx2Vnni, Isa::kAvx2}, std::pair{Isa::kAvx512Vnni, Isa::kAvx512}}) {
    if (!IsaSupported(vnni) || !IsaSupported(base)) continue;
    ++tested;
    const auto& tv = internal::TableFor(vnni);
    const auto& tb = internal::TableFor(base);
    for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_0, DType::kQ8_0, DType::kMXFP4}) {
      SCOPED_TRACE(std::string(IsaName(vnni)) + " " + DTypeName(t));
      for (int rep = 0; rep < 20; ++rep) {
        const int64_t n = RandomLength(rng, t);
        auto w = RandomRow(rng, t, n);
        auto x = RandomFloats(rng, n, rep % 2 ? 1.f : 100.f);
        auto xq = ToPartner(t, x.data(), n);
        const float a = tv.dot[static_cast<int>(t)](w.data(), xq.data(), n);
        const float b = tb.dot[static_cast<int>(t)](w.data(), xq.data(), n);
        ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "n=" << n;
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "this CPU has no VNNI table beside its base";
}

// MXFP4 rows of random bytes (every e2m1 code, exponents from the denormal e = 0, 1 through
// the normal range) against the scalar twin on every table, one and eight rows at a time, and
// the twin against the dequantized product computed in double.
TEST(Dot, Mxfp4AnyBytesEqualScalarTwinBitExact) {
  std::mt19937 rng(17);
  const auto& scalar = internal::TableFor(Isa::kScalar);
  std::uniform_int_distribution<int> byte(0, 255), expo(0, 150);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    SCOPED_TRACE(IsaName(isa));
    for (int64_t nb : {1, 3, 8, 9, 17, 40}) {
      const int64_t n = 32 * nb;
      const size_t rb = RowBytes(DType::kMXFP4, n);
      std::vector<uint8_t> w(rb * internal::kMaxDotRows);
      for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
      auto* blocks = reinterpret_cast<block_mxfp4*>(w.data());
      // Row 0 only the exponents 0..3 (its sum lives at 2^-128 scales, so a wrong denormal scale
      // shows), the other rows mostly normal ones with 0, 1, 2 among them.
      for (int64_t i = 0; i < nb * internal::kMaxDotRows; ++i)
        blocks[i].e = static_cast<uint8_t>(i < nb ? i % 4 : i % 5 == 0 ? i % 3 : expo(rng) + 60);
      auto x = RandomFloats(rng, n, nb % 2 ? 1.f : 100.f);
      auto xq = ToPartner(DType::kMXFP4, x.data(), n);
      const internal::DotRowsFn rows_fn = tab.dot_rows[static_cast<int>(DType::kMXFP4)];
      ASSERT_EQ(rows_fn == nullptr, isa == Isa::kScalar);  // every SIMD table has the multi-row dot
      float rows[internal::kMaxDotRows];
      if (rows_fn) rows_fn(w.data(), rb, xq.data(), internal::kMaxDotRows, n, rows);
      for (int r = 0; r < internal::kMaxDotRows; ++r) {
        const uint8_t* wr = w.data() + r * rb;
        const float want = scalar.dot[static_cast<int>(DType::kMXFP4)](wr, xq.data(), n);
        const float got = tab.dot[static_cast<int>(DType::kMXFP4)](wr, xq.data(), n);
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
            << "nb=" << nb << " row " << r << ": " << got << " vs " << want;
        if (rows_fn) {
          ASSERT_EQ(std::memcmp(&rows[r], &want, 4), 0) << "nb=" << nb << " row " << r << " (8-row call)";
        }
        auto wf = Dequant(DType::kMXFP4, wr, n);
        auto xf = Dequant(DType::kQ8_0, xq.data(), n);
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(wf[i]) * xf[i];
        ASSERT_NEAR(want, exact, 1e-5 * AbsDot(wf, xf) + 1e-37) << "nb=" << nb << " row " << r;
      }
    }
  }
}

// A multi-row dot gives each row the bits of the table's single dot, for every row count.
TEST(Dot, RowsEqualSingleDotsBitExact) {
  std::mt19937 rng(16);
  int tested = 0;
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    for (DType t : MatMulTypes()) {
      const internal::DotRowsFn rows = tab.dot_rows[static_cast<int>(t)];
      if (!rows) continue;
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      ++tested;
      for (int rep = 0; rep < 20; ++rep) {
        const int64_t n = RandomLength(rng, t);
        const size_t rb = RowBytes(t, n);
        std::vector<uint8_t> w;
        for (int r = 0; r < internal::kMaxDotRows; ++r) {
          auto row = RandomRow(rng, t, n);
          w.insert(w.end(), row.begin(), row.end());
        }
        auto x = RandomFloats(rng, n, rep % 2 ? 1.f : 100.f);
        auto xq = ToPartner(t, x.data(), n);
        for (int nr = 1; nr <= internal::kMaxDotRows; ++nr) {
          float out[internal::kMaxDotRows];
          rows(w.data(), rb, xq.data(), nr, n, out);
          for (int r = 0; r < nr; ++r) {
            const float single = tab.dot[static_cast<int>(t)](w.data() + r * rb, xq.data(), n);
            ASSERT_EQ(std::memcmp(&out[r], &single, 4), 0) << "n=" << n << " nr=" << nr << " row " << r;
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no ISA on this CPU has multi-row dots";
}

TEST(Dot, F32HelpersMatchRef) {
  std::mt19937 rng(12);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    for (int rep = 0; rep < 50; ++rep) {
      const int64_t n = std::uniform_int_distribution<int64_t>(1, 200)(rng);
      auto a = RandomFloats(rng, n), b = RandomFloats(rng, n);
      EXPECT_NEAR(tab.dot_f32(a.data(), b.data(), n), ref::DotF32(a.data(), b.data(), n),
                  1e-5 * AbsDot(a, b));
      auto y1 = b, y2 = b;
      tab.axpy(0.37f, a.data(), y1.data(), n);
      ref::Axpy(0.37f, a.data(), y2.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-6f * (std::fabs(y2[i]) + 1));
      tab.scale(y1.data(), -1.5f, n);
      ref::Scale(y2.data(), -1.5f, n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-6f * (std::fabs(y2[i]) + 1));
    }
  }
}

}  // namespace
}  // namespace ferry::kernels
