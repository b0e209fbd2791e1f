// W8A8 kernels: activation quantization and int8 dots equal the scalar truth bit for bit on
// every ISA (ragged lengths included), and MatMulW8A8 equals a naive double reference and is
// bit-identical across token counts and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace ferry::kernels {
namespace {

using testing::RandomFloats;

std::vector<int8_t> RandomInt8(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int> d(-128, 127);  // -128 included: files may hold it
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return v;
}

// Ragged tails around the 256-bit (32) and 512-bit (64, two registers 128) steps.
const int64_t kLengths[] = {1,   7,   31,  32,  33,  63,  64,   65,   100, 127,
                            128, 129, 191, 255, 256, 257, 1000, 2048, 4099};

TEST(Int8, QuantizeMatchesReferenceOnEveryIsa) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(81);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (int64_t n : kLengths) {
      for (float static_scale : {0.f, 0.01f, 0.5f}) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " n=" + std::to_string(n) +
                     " s=" + std::to_string(static_scale));
        auto x = RandomFloats(rng, n, 2.0f);
        x[static_cast<size_t>(n) / 2] =
            0.5f;  // an exact .5 multiple when s = 0.01 / 0.5 would round half-even
        std::vector<int8_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
        const float s_want = ref::QuantizeActInt8(x.data(), n, static_scale, want.data());
        const float s_got = QuantizeActInt8(x.data(), n, static_scale, got.data());
        EXPECT_EQ(s_want, s_got);
        EXPECT_EQ(want, got);
        // Properties of the truth itself: within +-127, error at most half a step (unclamped).
        const float s = s_want;
        if (static_scale <= 0.f) {
          float amax = 0;
          for (float v : x) amax = std::max(amax, std::fabs(v));
          EXPECT_FLOAT_EQ(s, amax / 127.f);
        }
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_GE(want[i], -127);
          if (std::fabs(x[i]) < 127.f * s) {
            ASSERT_LE(std::fabs(x[i] - want[i] * s), 0.5f * s * 1.0001f) << i;
          }
        }
      }
    }
  }
}

TEST(Int8, AllZeroRowQuantizesToZeros) {
  std::vector<float> x(40, 0.f);
  std::vector<int8_t> q(40, 1);
  EXPECT_EQ(QuantizeActInt8(x.data(), 40, 0.f, q.data()), 0.f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

TEST(Int8, DotsMatchReferenceOnEveryIsa) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(82);
  for (Isa isa : testing::TestIsas()) {
    const internal::KernelTable& tab = internal::TableFor(isa);
    for (int64_t n : kLengths) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " n=" + std::to_string(n));
      auto w = RandomInt8(rng, 4 * n);
      auto x = RandomInt8(rng, n);
      for (auto& v : x) v = std::max<int8_t>(v, -127);  // activations never hold -128
      int64_t exact[4];
      for (int r = 0; r < 4; ++r) {
        exact[r] = 0;
        for (int64_t i = 0; i < n; ++i) exact[r] += int64_t{w[r * n + i]} * x[i];
        EXPECT_EQ(tab.dot_i8(w.data() + r * n, x.data(), n), exact[r]);
      }
      int32_t out[4];
      tab.dot_i8x4(w.data(), n, x.data(), n, out);
      for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r], exact[r]);
    }
    // Extremes: -128 weights against +-127 activations saturate nothing.
    std::vector<int8_t> w(96, -128), x(96, 127);
    EXPECT_EQ(tab.dot_i8(w.data(), x.data(), 96), -128 * 127 * 96);
  }
}

// The longest rows W8A8 takes, with the largest products: the true sums fit int32, while the
// VNNI kernels' biased sums ((w + 128) * x) wrap and must come back exact.
TEST(Int8, LongestRowsStayExactOnEveryIsa) {
  const int64_t n = kMaxW8A8In;
  struct Fill {
    int8_t w, x;
  };
  for (Isa isa : testing::TestIsas()) {
    const internal::KernelTable& tab = internal::TableFor(isa);
    for (const Fill f : {Fill{127, 127}, Fill{-128, -127}, Fill{-128, 127}, Fill{127, -127}}) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " w=" + std::to_string(f.w) + " x=" + std::to_string(f.x));
      std::vector<int8_t> w(static_cast<size_t>(4 * n), f.w), x(static_cast<size_t>(n), f.x);
      const int64_t want = int64_t{f.w} * f.x * n;
      ASSERT_EQ(tab.dot_i8(w.data(), x.data(), n), want);
      int32_t out[4];
      tab.dot_i8x4(w.data(), n, x.data(), n, out);
      for (int r = 0; r < 4; ++r) ASSERT_EQ(out[r], want) << r;
    }
  }
}

struct W8A8Problem {
  int64_t n_out, n_in, n_tok;
  std::vector<int8_t> w;  // [n_out, n_in]
  std::vector<float> ws;  // [n_out]
  std::vector<float> x;   // [n_tok, n_in]
};

W8A8Problem MakeW8A8(std::mt19937& rng, int64_t n_out, int64_t n_in, int64_t n_tok) {
  W8A8Problem p{n_out, n_in, n_tok, RandomInt8(rng, n_out * n_in), {}, RandomFloats(rng, n_tok * n_in)};
  std::uniform_real_distribution<float> sd(1e-4f, 1e-2f);
  for (int64_t o = 0; o < n_out; ++o) p.ws.push_back(sd(rng));
  return p;
}

TEST(MatMulW8A8, MatchesNaiveReferenceDynamicAndStatic) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(83);
  ThreadPool pool(2);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (int64_t n_in : {int64_t{5}, int64_t{100}, int64_t{512}, int64_t{777}}) {
      for (float in_scale : {0.f, 0.03f}) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " n_in=" + std::to_string(n_in) +
                     " s=" + std::to_string(in_scale));
        W8A8Problem p = MakeW8A8(rng, 37, n_in, 6);
        std::vector<float> y(static_cast<size_t>(p.n_tok * p.n_out));
        MatMulW8A8(p.w.data(), p.ws.data(), p.n_out, n_in, p.x.data(), p.n_tok, in_scale, y.data(), &pool);
        for (int64_t t = 0; t < p.n_tok; ++t) {
          std::vector<int8_t> q(static_cast<size_t>(n_in));
          const float s = ref::QuantizeActInt8(p.x.data() + t * n_in, n_in, in_scale, q.data());
          for (int64_t o = 0; o < p.n_out; ++o) {
            double want = 0;
            for (int64_t i = 0; i < n_in; ++i) want += static_cast<double>(p.w[o * n_in + i]) * q[i];
            want *= double{s} * p.ws[o];
            ASSERT_NEAR(y[t * p.n_out + o], want, 1e-6 * std::fabs(want) + 1e-9) << "t=" << t << " o=" << o;
          }
          // And close to the float product (quantization error only).
          if (in_scale == 0.f) {
            double fl = 0, mag = 0;
            for (int64_t i = 0; i < n_in; ++i) {
              fl += static_cast<double>(p.w[i]) * p.ws[0] * p.x[t * n_in + i];
              mag += std::fabs(static_cast<double>(p.w[i]) * p.ws[0]) * s;
            }
            EXPECT_NEAR(y[t * p.n_out], fl, mag);
          }
        }
      }
    }
  }
}

TEST(MatMulW8A8, BitIdenticalAcrossBatchThreadsAndIsas) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(84);
  W8A8Problem p = MakeW8A8(rng, 133, 300, 11);
  ThreadPool pool1(1), pool2(2), pool3(3);
  std::vector<float> base(static_cast<size_t>(p.n_tok * p.n_out));
  ASSERT_TRUE(isa_guard.Set(Isa::kScalar));
  MatMulW8A8(p.w.data(), p.ws.data(), p.n_out, p.n_in, p.x.data(), p.n_tok, 0.f, base.data(), &pool1);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
      for (int64_t t = 0; t < p.n_tok; ++t) {  // each token alone
        std::vector<float> y(static_cast<size_t>(p.n_out));
        MatMulW8A8(p.w.data(), p.ws.data(), p.n_out, p.n_in, p.x.data() + t * p.n_in, 1, 0.f, y.data(), pool);
        for (int64_t o = 0; o < p.n_out; ++o) ASSERT_EQ(y[o], base[t * p.n_out + o]) << IsaName(isa);
      }
      std::vector<float> y(base.size());
      MatMulW8A8(p.w.data(), p.ws.data(), p.n_out, p.n_in, p.x.data(), p.n_tok, 0.f, y.data(), pool);
      ASSERT_EQ(y, base) << IsaName(isa);
    }
  }
}

}  // namespace
}  // namespace ferry::kernels
