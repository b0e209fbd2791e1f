// The T-MAC-style table-lookup q4_0 GEMV prototype of bench/tmac_proto.h (issue 14 item 3;
// measured in bench/tmac_bench.cc, not used by the product): the scalar twin equals the q4_0
// dot product computed directly from the blocks (exact integers, then the same float scaling),
// agrees with Ferry's packed q4_0 MatMul, and the AVX-512 kernel equals the twin bit for bit.
#include "../bench/tmac_proto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "isa_guard.h"
#include "kernels/kernels.h"

namespace ferry::proto {
namespace {

struct Case {
  int64_t n_out, n_in;
};

std::vector<float> RandomVector(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(TmacProto, TwinEqualsDirectQ4_0DotAndAvx512EqualsTwin) {
  for (const Case c : {Case{8, 32}, Case{40, 256}, Case{64, 2048}}) {
    SCOPED_TRACE(::testing::Message() << c.n_out << " x " << c.n_in);
    const auto w = RandomVector(static_cast<size_t>(c.n_out * c.n_in), 1, 1.f);
    auto x = RandomVector(static_cast<size_t>(c.n_in), 2, 3.f);
    for (int i = 0; i < 32 && c.n_in > 32; ++i) x[32 + static_cast<size_t>(i)] = 0.f;  // an all-zero block
    x[0] = 1e4f;  // a block where one value dominates the scale
    const size_t row = RowBytes(DType::kQ4_0, c.n_in);
    std::vector<uint8_t> q(row * static_cast<size_t>(c.n_out));
    for (int64_t o = 0; o < c.n_out; ++o)
      kernels::QuantizeRow(DType::kQ4_0, w.data() + o * c.n_in, q.data() + row * static_cast<size_t>(o),
                           c.n_in);
    const TmacQ4 packed = PackTmac(q.data(), c.n_out, c.n_in);
    TmacAct act;
    std::vector<float> ref(static_cast<size_t>(c.n_out));
    TmacGemv(packed, x.data(), ref.data(), act, nullptr, /*simd=*/false);

    // Directly from the blocks: per row and block the integer dot sum (q - 8) * x8, then
    // the twin's float steps (partials of even and odd groups of 4, one fma each per block).
    const auto* blocks = reinterpret_cast<const kernels::block_q4_0*>(q.data());
    const int64_t nb = c.n_in / 32;
    for (int64_t o = 0; o < c.n_out; ++o) {
      float acc[2] = {0.f, 0.f};
      for (int64_t b = 0; b < nb; ++b) {
        const kernels::block_q4_0& blk = blocks[o * nb + b];
        const float* xb = x.data() + b * 32;
        float amax = 0.f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float id = amax > 0.f ? 127.f / amax : 0.f;
        int32_t part[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
          const int qv = i < 16 ? blk.qs[i] & 0xF : blk.qs[i - 16] >> 4;
          const int x8 = static_cast<int>(std::nearbyint(xb[i] * id));
          part[(i / 4) % 2] += (qv - 8) * x8 + (((i / 4) % 2) ? 8 * x8 : 0);
          if ((i / 4) % 2) part[0] -= 8 * x8;
        }
        const float sc = Fp16ToFp32(blk.d) * Fp16ToFp32(Fp32ToFp16(amax / 127.f));
        for (int k = 0; k < 2; ++k) acc[k] = std::fma(static_cast<float>(part[k]), sc, acc[k]);
      }
      ASSERT_EQ(ref[static_cast<size_t>(o)], acc[0] + acc[1]) << "row " << o;
    }

    // Ferry's packed q4_0 path on the scalar table: the same products, another float order.
    std::vector<float> ferry(static_cast<size_t>(c.n_out));
    {
      testing::ScopedIsa isa(kernels::Isa::kScalar);
      AlignedBuffer pw(kernels::PackedBytes(DType::kQ4_0, c.n_out, c.n_in));
      kernels::PackWeights(DType::kQ4_0, q.data(), c.n_out, c.n_in, pw.data(), nullptr);
      kernels::MatMulPacked(pw.data(), DType::kQ4_0, c.n_out, c.n_in, x.data(), 1, ferry.data(), nullptr);
    }
    double norm = 0;
    for (float v : ferry) norm = std::max(norm, std::fabs(double{v}));
    for (int64_t o = 0; o < c.n_out; ++o)
      EXPECT_NEAR(ref[static_cast<size_t>(o)], ferry[static_cast<size_t>(o)], 1e-5 * norm) << "row " << o;

    if (!kernels::IsaSupported(kernels::Isa::kAvx512)) {
      GTEST_SKIP() << "this CPU lacks avx512 (F/BW/VL/DQ): the AVX-512 kernel is not run";
    }
    std::vector<float> fast(static_cast<size_t>(c.n_out));
    ThreadPool pool(2);
    TmacGemv(packed, x.data(), fast.data(), act, &pool, /*simd=*/true);
    EXPECT_EQ(fast, ref);
  }
}

}  // namespace
}  // namespace ferry::proto
