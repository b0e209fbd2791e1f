// RopeAngles and kernels::Rope together against llama.cpp's own RoPE output, bit for bit.
#include "model/rope_angles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"

namespace ferry {
namespace {

// Query rows of layer 0 of stories260K-Q8_0.gguf (rot_dim 8, base 10000, normal pairs) before
// and after llama.cpp b10309's rope op (x86, GCC, AVX-512 build; its "Qcur-0" tensors through
// the eval callback, first window of the evaluation text): position, pair, x0, x1 in, x0, x1
// out. Chosen where a plausible other rounding gives different bits: "angle" rows differ when
// the angle is pos * base^(-2j/8) (one rounding) instead of llama.cpp's theta *= base^(-2/8) per
// pair, "fma" rows when the rotation rounds both products (x0 c - x1 s unfused).
struct LlamaCppRope {
  int pos, pair;
  float x0, x1, y0, y1;
};
constexpr LlamaCppRope kLlamaCpp[] = {
    {1, 0, -0x1.52708cp-1f, -0x1.43e116p-2f, -0x1.74bcdep-4f, -0x1.744892p-1f},  // fma
    {1, 2, -0x1.1c980ap+1f, 0x1.90c662p+1f, -0x1.20965cp+1f, 0x1.8de8b4p+1f},    // fma
    {1, 0, 0x1.e68786p-2f, 0x1.44fabep-2f, -0x1.52cfa8p-7f, 0x1.247e66p-1f},     // fma
    {1, 0, -0x1.2621a8p-3f, 0x1.941b30p-1f, -0x1.7bc60cp-1f, 0x1.38ed6ep-2f},    // fma
    {1, 1, 0x1.7c8268p-1f, -0x1.28fc6ap-2f, 0x1.896edap-1f, -0x1.b70deap-3f},    // fma
    {1, 3, 0x1.1a6ff8p+0f, 0x1.4b3298p-1f, 0x1.1a458ap+0f, 0x1.4bc32ap-1f},      // fma
    {1, 0, 0x1.8fecc6p+0f, 0x1.887778p+0f, -0x1.c8ad06p-2f, 0x1.1249b4p+1f},     // fma
    {1, 2, -0x1.4b4770p-3f, 0x1.df1a8cp+1f, -0x1.97eaf6p-3f, 0x1.dedf6ap+1f},    // fma
    {3, 3, 0x1.d8c0c0p+3f, 0x1.642f9cp+0f, 0x1.d89e04p+3f, 0x1.6f87ccp+0f},      // angle
    {5, 2, -0x1.4b4770p-3f, 0x1.df1a8cp+1f, -0x1.64fe80p-2f, 0x1.dd785ap+1f},    // angle
    {6, 3, -0x1.bb4d94p+2f, -0x1.2a677ap-2f, -0x1.bb2ee4p+2f, -0x1.54f4a8p-2f},  // angle
    {7, 2, 0x1.d92a40p-5f, -0x1.464a14p-2f, 0x1.474a20p-4f, -0x1.415a7ep-2f},    // angle
    {7, 2, -0x1.ade6a8p+2f, 0x1.2fa9d4p+1f, -0x1.b777bcp+2f, 0x1.e590c4p+0f},    // angle
    {7, 2, -0x1.12930ep+3f, 0x1.72880ep+0f, -0x1.15243ap+3f, 0x1.aff9d0p-1f},    // angle
    {7, 2, -0x1.0d958ep+1f, -0x1.631b7ep+2f, -0x1.b67fc6p+0f, -0x1.6baa5cp+2f},  // angle, fma
    {10, 2, 0x1.3174a2p+2f, -0x1.33acd6p-1f, 0x1.33c4e6p+2f, -0x1.f171f4p-4f},   // angle, fma
};

TEST(RopeAngles, RotatesAsLlamaCppToTheBit) {
  const RopeAngles rope(8, 10000.0f, 1.0f, {}, {}, 1.0f);
  float cs[8];
  for (const LlamaCppRope& e : kLlamaCpp) {
    SCOPED_TRACE(testing::Message() << "position " << e.pos << " pair " << e.pair);
    rope.Fill(e.pos, cs);
    float x[8] = {};
    x[2 * e.pair] = e.x0;
    x[2 * e.pair + 1] = e.x1;
    kernels::Rope(x, 1, 8, 8, cs, /*neox=*/false);
    EXPECT_EQ(x[2 * e.pair], e.y0);
    EXPECT_EQ(x[2 * e.pair + 1], e.y1);
  }
}

// Position 0 is the identity (cos 1, sin 0 for every pair), and the angles follow
// pos * base^(-2j/rot_dim) / factor_j * freq_scale (in double) to a few float ulps, with the
// magnitude on cos and sin.
TEST(RopeAngles, AnglesFollowTheFormula) {
  const std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
  const RopeAngles rope(8, 500000.0f, 0.25f, factors, {}, 1.5f);
  float cs[8];
  rope.Fill(0, cs);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(cs[2 * j], 1.5f);
    EXPECT_EQ(cs[2 * j + 1], 0.0f);
  }
  for (int pos : {1, 17, 1000, 65535}) {
    rope.Fill(pos, cs);
    for (int j = 0; j < 4; ++j) {
      const double angle = pos * std::pow(500000.0, -2.0 * j / 8) / factors[static_cast<size_t>(j)] * 0.25;
      // The recurrence rounds once per pair: a relative angle error of a few ulps, times the angle.
      const double tol = 1.5 * (4 * j + 4) * 6e-8 * std::fabs(angle) + 1e-6;
      EXPECT_NEAR(cs[2 * j], 1.5 * std::cos(angle), tol) << pos << " " << j;
      EXPECT_NEAR(cs[2 * j + 1], 1.5 * std::sin(angle), tol) << pos << " " << j;
    }
  }
}

// YaRN: below the ramp's low dim a pair keeps the extrapolated angle (freq_scale not applied),
// above its high dim the interpolated one (freq_scale applied).
TEST(RopeAngles, YarnRampMixesExtrapolatedAndInterpolatedAngles) {
  const float scale = 1.0f / 32;
  const RopeAngles plain(16, 10000.0f, 1.0f, {}, {}, 1.0f);
  const RopeAngles scaled(16, 10000.0f, scale, {}, {}, 1.0f);
  const RopeAngles yarn(16, 10000.0f, scale, {}, {true, 2.0f, 5.0f}, 1.0f);
  float p[16], s[16], y[16];
  plain.Fill(300, p);
  scaled.Fill(300, s);
  yarn.Fill(300, y);
  for (int j : {0, 1, 2}) EXPECT_EQ(y[2 * j], p[2 * j]) << j;
  for (int j : {5, 6, 7}) EXPECT_EQ(y[2 * j], s[2 * j]) << j;
  EXPECT_NE(y[6], p[6]);  // pair 3, a third of the way: neither
  EXPECT_NE(y[6], s[6]);
}

}  // namespace
}  // namespace ferry
