// The 2:4 compressed f16 GEMV prototype of bench/sparse24_proto.h (issue 9 item 6; measured
// in bench/sparse24_bench.cc, not used by the product): packing keeps exactly the non-zeros,
// the scalar reference equals a double dense product of the f16-rounded weights, and the
// AVX2 kernel equals the reference.
#include "../bench/sparse24_proto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace ferry::proto {
namespace {

TEST(Sparse24Proto, ReferenceAndAvx2EqualDenseProduct) {
  for (int64_t n_out : {1, 7, 33}) {
    const int64_t n_in = 160;  // 10 chunks of 16
    std::mt19937 rng(static_cast<uint32_t>(n_out));
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> w(static_cast<size_t>(n_out * n_in));
    for (size_t g = 0; g < w.size(); g += 4) {
      const int keep0 = static_cast<int>(rng() % 4),
                keep1 = static_cast<int>(rng() % 4);  // may coincide: 1 kept
      for (int i = 0; i < 4; ++i)
        w[g + i] = (i == keep0 || i == keep1) ? Fp16ToFp32(Fp32ToFp16(d(rng))) : 0.f;
    }
    std::vector<float> x(static_cast<size_t>(n_in));
    for (float& v : x) v = d(rng);
    const Sparse24F16 s = Pack24(w, n_out, n_in);
    ASSERT_EQ(s.values.size(), static_cast<size_t>(n_out * n_in / 2));
    std::vector<float> ref(static_cast<size_t>(n_out)), fast(static_cast<size_t>(n_out));
    MatVec24Ref(s, 0, n_out, x.data(), ref.data());
    for (int64_t o = 0; o < n_out; ++o) {
      double want = 0;
      for (int64_t i = 0; i < n_in; ++i)
        want += double{w[static_cast<size_t>(o * n_in + i)]} * x[static_cast<size_t>(i)];
      ASSERT_NEAR(ref[static_cast<size_t>(o)], want, 1e-4 * (1 + std::fabs(want))) << o;
    }
    if (kernels::BestSupportedIsa() == kernels::Isa::kScalar) GTEST_SKIP() << "no AVX2";
    MatVec24Avx2(s, 0, n_out, x.data(), fast.data());
    for (int64_t o = 0; o < n_out; ++o)
      ASSERT_NEAR(fast[static_cast<size_t>(o)], ref[static_cast<size_t>(o)],
                  1e-4 * (1 + std::fabs(ref[static_cast<size_t>(o)])));
  }
}

}  // namespace
}  // namespace ferry::proto
