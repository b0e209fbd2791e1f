// RmsNorm, Softmax, SiluMul, GeluTanhMul, AddInPlace and Rope: hand-written expectations and every ISA
// against ref on random data (ragged lengths).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels {
namespace {

using testing::RandomFloats;

TEST(Ops, RmsNormKnownValues) {
  testing::ScopedIsa isa_guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 0.5f};
    float y[4];
    RmsNorm(x, w, y, 4, 0.f);
    const double s = 1.0 / std::sqrt(7.5);
    EXPECT_NEAR(y[0], 1 * s, 1e-6);
    EXPECT_NEAR(y[1], 2 * s, 1e-6);
    EXPECT_NEAR(y[2], 6 * s, 1e-6);
    EXPECT_NEAR(y[3], 2 * s, 1e-6);
    float z[4] = {0, 0, 0, 0};
    RmsNorm(z, w, z, 4, 1e-5f);  // eps keeps zeros finite; aliasing allowed
    EXPECT_EQ(z[0], 0.f);
  }
}

TEST(Ops, SoftmaxKnownValues) {
  testing::ScopedIsa isa_guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    float x[3] = {1, 2, 3};
    Softmax(x, 3);
    EXPECT_NEAR(x[0], 0.09003057f, 1e-6);
    EXPECT_NEAR(x[1], 0.24472847f, 1e-6);
    EXPECT_NEAR(x[2], 0.66524096f, 1e-6);
    std::vector<float> m(11, 0.f);
    m[3] = -std::numeric_limits<float>::infinity();
    m[9] = -std::numeric_limits<float>::infinity();
    Softmax(m.data(), 11);
    EXPECT_EQ(m[3], 0.f);
    EXPECT_EQ(m[9], 0.f);
    EXPECT_NEAR(m[0], 1.0f / 9, 1e-7);
  }
}

TEST(Ops, SiluMulKnownValues) {
  testing::ScopedIsa isa_guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    std::vector<float> g = {0, 1, -1, 10, -10, 100, -100, 2, 0.5f};
    std::vector<float> u = {1, 1, 2, 1, 1, 1, 1, -1, 4};
    std::vector<float> out(g.size());
    SiluMul(g.data(), u.data(), out.data(), static_cast<int64_t>(g.size()));
    EXPECT_EQ(out[0], 0.f);
    EXPECT_NEAR(out[1], 0.7310586f, 1e-6);
    EXPECT_NEAR(out[2], -0.26894142f * 2, 1e-6);
    EXPECT_NEAR(out[3], 9.9995460f, 1e-5);
    EXPECT_NEAR(out[4], -4.5397868e-4f, 1e-9);
    EXPECT_NEAR(out[5], 100.f, 1e-4);
    EXPECT_NEAR(out[6], 0.f, 1e-30);
    EXPECT_NEAR(out[7], -1.7615942f, 1e-6);
    EXPECT_NEAR(out[8], 0.31122967f * 4, 1e-6);
  }
}

// cap * tanh(x / cap) computed in double (Python), cap 50: the first 8 in a SIMD register,
// the last one in the scalar tail; within the SIMD tables' bound of 3e-7 * cap.
TEST(Ops, SoftCapKnownValues) {
  testing::ScopedIsa isa_guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    std::vector<float> x = {0, 25, -100, 1000, -1e30f, 0.01f, 1, -60, 150};
    const std::vector<double> want = {0,
                                      23.105857863000487,
                                      -48.201379003790845,
                                      50,
                                      -50,
                                      0.009999999866666668,
                                      0.9998666879965467,
                                      -41.68273035060776,
                                      49.752737684336525};
    SoftCap(x.data(), static_cast<int64_t>(x.size()), 50.f);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 2e-5) << IsaName(isa) << " " << i;
    EXPECT_EQ(x[0], 0.f);
  }
}

// Values of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) * u computed in double (Python).
TEST(Ops, GeluTanhMulKnownValues) {
  testing::ScopedIsa isa_guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    std::vector<float> g = {0, 1, -1, 10, -3, 100, -100, 2, 0.5f};
    std::vector<float> u = {1, 1, 2, 1, 1, 1, 1, -1, 4};
    std::vector<float> out(g.size());
    GeluTanhMul(g.data(), u.data(), out.data(), static_cast<int64_t>(g.size()));
    EXPECT_EQ(out[0], 0.f);
    EXPECT_NEAR(out[1], 0.84119199f, 1e-6);
    EXPECT_NEAR(out[2], -0.31761602f, 1e-6);
    EXPECT_NEAR(out[3], 10.f, 1e-5);
    EXPECT_NEAR(out[4], -3.6373921e-3f, 1e-8);
    EXPECT_NEAR(out[5], 100.f, 1e-4);
    EXPECT_NEAR(out[6], 0.f, 1e-30);
    EXPECT_NEAR(out[7], -1.9545977f, 1e-6);
    EXPECT_NEAR(out[8], 1.3828560f, 1e-6);
  }
}

// llama.cpp's GeGLU: entries of ggml_table_gelu_f16 read from llama.cpp b10309 (82bb485, built
// with -DGGML_NATIVE=ON on x86-64) after ggml_cpu_init(), the range rules of ggml_vec_geglu_f32,
// and the step function of the fp16-rounded gate, on every table.
TEST(Ops, GeluFp16TableMulIsLlamaCppsTable) {
  struct Case {
    float gate, up;
    uint32_t want;  // float bits of the output
  };
  const auto half = [](uint16_t h) { return Fp32ToBits(Fp16ToFp32(h)); };
  const Case cases[] = {
      {1.0f, 1.0f, half(0x3abb)},
      {-1.0f, 1.0f, half(0xb115)},
      {0.5f, 1.0f, half(0x3588)},
      {3.0f, 1.0f, half(0x41fe)},
      {-3.0f, 1.0f, half(0x9b73)},
      {2.0f, -1.0f, Fp32ToBits(-Fp16ToFp32(0x3fd2))},
      {-1.9990234375f, 1.0f, half(0xa9d3)},  // the entry that needs ggml's fused 1 + a x^2
      {1.0002f, 1.0f, half(0x3abb)},         // rounds to fp16 1.0: a step function of the gate
      {-9.9921875f, 1.0f, 0x80000000u},      // -0: the table's entry
      {-10.0f, 5.0f, 0u},                    // +0 where gate <= -10, whatever up is
      {-1e6f, std::numeric_limits<float>::infinity(), 0u},
      {10.0f, 3.0f, Fp32ToBits(30.0f)},  // gate * up where gate >= 10
      {12.5f, -2.0f, Fp32ToBits(-25.0f)},
  };
  const int n = static_cast<int>(std::size(cases));
  std::vector<float> g(n), u(n), out(n);
  for (int i = 0; i < n; ++i) g[i] = cases[i].gate, u[i] = cases[i].up;
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    // 8 cases through the vector loop, the rest through its tail; then one at a time.
    tab.gelu_fp16_table_mul(g.data(), u.data(), out.data(), n);
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(Fp32ToBits(out[i]), cases[i].want) << IsaName(isa) << " gate " << g[i];
    for (int i = 0; i < n; ++i) {
      std::vector<float> g8(8, cases[i].gate), u8(8, cases[i].up), o8(8);
      tab.gelu_fp16_table_mul(g8.data(), u8.data(), o8.data(), 8);
      EXPECT_EQ(Fp32ToBits(o8[7]), cases[i].want) << IsaName(isa) << " gate " << g[i] << " in a full vector";
    }
  }
}

// Every table entry is fp16(gelu_tanh(x)) of its x within the fp16 rounding, against the
// formula in double (f32's 1 + tanh cancels for large negative x: |x| 2^-23 absolute).
TEST(Ops, GeluFp16TableIsTheTanhGeluRoundedToFp16) {
  const uint16_t* table = ref::GeluFp16Table();
  int checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const double x = Fp16ToFp32(static_cast<uint16_t>(h));
    if (!std::isfinite(x) || std::fabs(x) >= 10.0) continue;
    const double want = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    const double got = Fp16ToFp32(table[h]);
    ASSERT_NEAR(got, want,
                std::ldexp(std::fabs(want), -11) + std::ldexp(1.0, -24) + std::ldexp(std::fabs(x), -23))
        << "x = " << x;
    ++checked;
  }
  EXPECT_EQ(checked, 2 * (0x48ff + 1));  // every fp16 value below 10 in magnitude, both signs
}

// Every table computes the scalar twin's bits: every finite fp16 value and random floats
// around the +-10 edges as gates, an odd length, and out aliasing gate.
TEST(Ops, GeluFp16TableMulEveryIsaEqualsScalarTwin) {
  std::mt19937 rng(31);
  std::vector<float> g;
  for (uint32_t h = 0; h < 65536; ++h)
    if (const float x = Fp16ToFp32(static_cast<uint16_t>(h)); std::isfinite(x)) g.push_back(x);
  std::uniform_real_distribution<float> edge(-11.f, 11.f);
  for (int i = 0; i < 1001; ++i) g.push_back(edge(rng));
  const int64_t n = static_cast<int64_t>(g.size());
  ASSERT_NE(n % 8, 0);
  const std::vector<float> u = RandomFloats(rng, n, 2.f);
  std::vector<float> want(n);
  ref::GeluFp16TableMul(g.data(), u.data(), want.data(), n);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    std::vector<float> got = g;
    tab.gelu_fp16_table_mul(got.data(), u.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(Fp32ToBits(got[i]), Fp32ToBits(want[i])) << IsaName(isa) << " gate " << g[i];
  }
}

// gpt-oss's clamped SwiGLU against its formula in double: the gate clamped above at 7 only,
// up clamped to [-7, 7] and offset by 1, sigmoid(1.702 g); out may alias gate.
TEST(Ops, SwigluOaiMulKnownValues) {
  const float gate[] = {10.f, 7.f, -3.f, 0.f, 1.f, -20.f, 2.5f};
  const float up[] = {-9.f, 8.f, 0.5f, 3.f, -1.f, 2.f, 100.f};
  const int n = 7;
  float out[n];
  SwigluOaiMul(gate, up, out, n);
  for (int i = 0; i < n; ++i) {
    const double g = std::min<double>(gate[i], 7.0), u = std::clamp<double>(up[i], -7.0, 7.0);
    const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-7) << i;
  }
  EXPECT_EQ(out[4], 0.0f);  // up = -1: (u + 1) = 0
  EXPECT_NEAR(out[0], 7.0 / (1.0 + std::exp(-1.702 * 7.0)) * -6.0, 1e-5);
  float alias[n];
  std::copy_n(gate, n, alias);
  SwigluOaiMul(alias, up, alias, n);
  EXPECT_EQ(0, std::memcmp(alias, out, sizeof out));
}

TEST(Ops, EveryIsaMatchesRefOnRandomData) {
  std::mt19937 rng(30);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    SCOPED_TRACE(IsaName(isa));
    for (int rep = 0; rep < 30; ++rep) {
      const int64_t n = std::uniform_int_distribution<int64_t>(1, 700)(rng);
      auto x = RandomFloats(rng, n, 3.f), w = RandomFloats(rng, n), u = RandomFloats(rng, n);
      std::vector<float> a(n), b(n);
      tab.rms_norm(x.data(), w.data(), a.data(), n, 1e-6f);
      ref::RmsNorm(x.data(), w.data(), b.data(), n, 1e-6f);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 1e-6f * std::fabs(b[i]) + 1e-30f);
      a = x;
      b = x;
      tab.softmax(a.data(), n);
      ref::Softmax(b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 2e-6f * b[i] + 1e-12f);
      tab.silu_mul(x.data(), u.data(), a.data(), n);
      ref::SiluMul(x.data(), u.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 2e-6f * std::fabs(b[i]) + 1e-30f);
      tab.gelu_tanh_mul(x.data(), u.data(), a.data(), n);
      ref::GeluTanhMul(x.data(), u.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        // exp(z) turns the float rounding of its argument z = -1.6 (x + 0.044715 x^3) (fused or
        // not) into a relative error of |z| ulps: the bound grows with |z| on top of SiluMul's.
        const float z = std::fabs(1.5957692f * (x[i] + 0.044715f * x[i] * x[i] * x[i]));
        ASSERT_NEAR(a[i], b[i], (2e-6f + 1.2e-7f * z) * std::fabs(b[i]) + 1e-30f);
      }
      // Soft-capping (cap 30) over scores of -120..120: saturated, linear and in between.
      for (int64_t i = 0; i < n; ++i) a[i] = b[i] = 40.f * x[i];
      tab.softcap(a.data(), n, 30.f);
      ref::SoftCap(b.data(), n, 30.f);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 3e-7f * 30.f) << 40.f * x[i];
      a = x;
      b = x;
      tab.add(a.data(), u.data(), n);
      ref::AddInPlace(b.data(), u.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i]);
    }
  }
}

// The fused residual add + norm equals the two kernels it replaces, bit for bit, on every ISA
// (ragged lengths included), so fusing never changes a model's output.
TEST(Ops, AddRmsNormEqualsAddThenRmsNorm) {
  std::mt19937 rng(31);
  for (Isa isa : testing::TestIsas()) {
    const auto& tab = internal::TableFor(isa);
    SCOPED_TRACE(IsaName(isa));
    for (int rep = 0; rep < 30; ++rep) {
      const int64_t n = std::uniform_int_distribution<int64_t>(1, 700)(rng);
      auto x = RandomFloats(rng, n, 3.f), d = RandomFloats(rng, n), w = RandomFloats(rng, n);
      std::vector<float> x1 = x, x2 = x, y1(n), y2(n);
      tab.add_rms_norm(x1.data(), d.data(), w.data(), y1.data(), n, 1e-5f);
      tab.add(x2.data(), d.data(), n);
      tab.rms_norm(x2.data(), w.data(), y2.data(), n, 1e-5f);
      ASSERT_EQ(x1, x2);
      ASSERT_EQ(y1, y2);
      std::vector<float> xr = x, yr(n);
      ref::AddRmsNorm(xr.data(), d.data(), w.data(), yr.data(), n, 1e-5f);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y1[i], yr[i], 1e-6f * std::fabs(yr[i]) + 1e-30f);
    }
  }
}

TEST(Ops, RopeNormalAndNeoxKnownValues) {
  const float cs[4] = {std::cos(1.0f), std::sin(1.0f), std::cos(0.5f), std::sin(0.5f)};  // angles 1, 0.5
  float x[4] = {1, 0, 0, 1};
  Rope(x, 1, 4, 4, cs, /*neox=*/false);
  EXPECT_NEAR(x[0], std::cos(1.0f), 1e-7);
  EXPECT_NEAR(x[1], std::sin(1.0f), 1e-7);
  EXPECT_NEAR(x[2], -std::sin(0.5f), 1e-7);
  EXPECT_NEAR(x[3], std::cos(0.5f), 1e-7);
  float y[4] = {1, 0, 0, 1};
  Rope(y, 1, 4, 4, cs, /*neox=*/true);
  EXPECT_NEAR(y[0], std::cos(1.0f), 1e-7);  // pair (0, 2) by angle 1
  EXPECT_NEAR(y[2], std::sin(1.0f), 1e-7);
  EXPECT_NEAR(y[1], -std::sin(0.5f), 1e-7);  // pair (1, 3) by angle 0.5
  EXPECT_NEAR(y[3], std::cos(0.5f), 1e-7);
}

TEST(Ops, RopePartialRotationAndHeads) {
  const float c = std::cos(1.5f), s = std::sin(1.5f);
  const float cs[2] = {c, s};
  // 2 heads of dim 4, only the first 2 dims rotate.
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Rope(x, 2, 4, 2, cs, false);
  EXPECT_NEAR(x[0], 1 * c - 2 * s, 1e-6);
  EXPECT_NEAR(x[1], 1 * s + 2 * c, 1e-6);
  EXPECT_EQ(x[2], 3.f);
  EXPECT_EQ(x[3], 4.f);
  EXPECT_NEAR(x[4], 5 * c - 6 * s, 1e-6);
  EXPECT_NEAR(x[5], 5 * s + 6 * c, 1e-6);
  EXPECT_EQ(x[7], 8.f);
  const float identity[4] = {1, 0, 1, 0};
  float z[4] = {1, 2, 3, 4};
  Rope(z, 1, 4, 4, identity, true);
  EXPECT_EQ(z[0], 1.f);
  EXPECT_EQ(z[3], 4.f);
}

// HadamardRotate against the Sylvester matrix written out: H[i][j] = (-1)^popcount(i & j),
// times 1/sqrt(n), in double; for every power-of-two width up to 256 and several heads.
TEST(Ops, HadamardRotateEqualsTheNormalizedSylvesterMatrix) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int n = 1; n <= 256; n *= 2) {
    SCOPED_TRACE(n);
    const int heads = 3;
    std::vector<float> x(static_cast<size_t>(heads * n));
    for (float& v : x) v = nd(rng);
    std::vector<float> y = x;
    HadamardRotate(y.data(), heads, n);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < n; ++i) {
        double want = 0;
        for (int j = 0; j < n; ++j)
          want += (__builtin_popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) * x[h * n + j];
        want /= std::sqrt(static_cast<double>(n));
        ASSERT_NEAR(y[h * n + i], want, 1e-5 * std::sqrt(static_cast<double>(n))) << h << " " << i;
      }
    HadamardRotate(y.data(), heads, n);  // H / sqrt(n) is its own inverse
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-5f) << i;
  }
}

}  // namespace
}  // namespace ferry::kernels
