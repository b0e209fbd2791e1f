// SmoothQuant: the smoothing transform leaves full-precision outputs unchanged, the scales
// follow the formula, stats follow the smoothed activations, and W8 per-channel rounding and
// the fake-quant preview behave.
#include "quant/smoothquant.h"

#include <gtest/gtest.h>

#include <cmath>

#include "quant/int4_quant.h"
#include "quant_test_util.h"

namespace ferry::quant {
namespace {

TEST(SmoothQuant, SmoothingLeavesFullPrecisionOutputsUnchanged) {
  const std::string dir = ferry::testing::TempDir();
  for (const char* preset : {"tiny", "tiny-qwen2"}) {
    SCOPED_TRACE(preset);
    auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir, preset));
    ASSERT_TRUE(src.ok());
    auto m = FloatModel::Load(**src);
    ASSERT_TRUE(m.ok());
    const auto tokens = testing::RandomTokens(m->config.n_vocab, 48, 2);
    const auto before = m->Forward(tokens);
    FloatModel f = *m;
    CalibStats stats = testing::TinyCalibration(f);
    for (double alpha : {0.5, 0.8}) {
      FloatModel g = f;
      CalibStats st = stats;
      ASSERT_TRUE(ApplySmoothQuant(g, st, alpha).ok());
      EXPECT_NE(g.layers[0].attn_norm, f.layers[0].attn_norm);
      EXPECT_LT(testing::RelDiff(before, g.Forward(tokens)), 1e-5) << "alpha " << alpha;
      // The updated stats describe the smoothed activations.
      const CalibStats fresh = testing::TinyCalibration(g);
      const auto& a = st.At(1, InputKind::kFfnIn).max_abs;
      const auto& b = fresh.At(1, InputKind::kFfnIn).max_abs;
      for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 1e-4 * std::fabs(b[j]) + 1e-7) << j;
    }
  }
}

TEST(SmoothQuant, ScalesFollowTheFormula) {
  FloatLinear a{2, 3, {1.f, -4.f, 0.5f, -2.f, 1.f, 0.25f}}, b{1, 3, {0.5f, 3.f, -1.f}};
  const std::vector<float> x_max = {8.f, 1.f, 16.f};
  const auto s = SmoothingScales({&a, &b}, x_max, 0.5);
  EXPECT_NEAR(s[0], std::sqrt(8.0 / 2.0), 1e-6);
  EXPECT_NEAR(s[1], std::sqrt(1.0 / 4.0), 1e-6);
  EXPECT_NEAR(s[2], std::sqrt(16.0 / 1.0), 1e-6);
  const auto s1 = SmoothingScales({&a, &b}, x_max, 1.0);  // alpha 1: s = max|X|
  EXPECT_NEAR(s1[2], 16.0, 1e-5);
}

TEST(SmoothQuant, Int8PerChannelWeightsAndPerTokenActivations) {
  std::vector<float> w = {0.1f, -0.5f, 0.25f, 0.f, 0.f, 0.f, 3.f, 1.f, -2.f};
  std::vector<int8_t> q;
  std::vector<float> sc;
  QuantizeMatrixInt8PerChannel(w, 3, 3, &q, &sc);
  EXPECT_FLOAT_EQ(sc[0], 0.5f / 127.f);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(sc[1], 0.f);
  EXPECT_EQ(q[3], 0);
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_LE(std::fabs(q[i] * sc[i / 3] - w[i]), 0.5f * sc[i / 3] + 1e-7f);
  std::vector<float> x = {1.f, -0.3f, 0.2f, 100.f, 50.f, -25.f};
  FakeQuantActInt8PerToken(x.data(), 2, 3);
  EXPECT_FLOAT_EQ(x[0], 1.f);
  EXPECT_FLOAT_EQ(x[3], 100.f);
  EXPECT_NEAR(x[1], -0.3f, 0.5f / 127.f);
  EXPECT_NEAR(x[4], 50.f, 50.f / 127.f);
}

TEST(SmoothQuant, FakeQuantPreviewIsCloseToFullPrecision) {
  const std::string dir = ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  auto payloads = QuantizeW8A8(*m, nullptr, {});
  ASSERT_TRUE(payloads.ok());
  ASSERT_EQ(payloads->size(), static_cast<size_t>(7 * m->config.n_layers));
  const auto tokens = testing::RandomTokens(m->config.n_vocab, 32, 3);
  const FloatModel fq = FakeQuantW8A8Model(*m, *payloads);
  const double d = testing::RelDiff(m->Forward(tokens), fq.Forward(tokens, nullptr, W8A8ActHook(*payloads)));
  EXPECT_GT(d, 0.0);   // rounding happened
  EXPECT_LT(d, 0.05);  // but int8 stays close
}

}  // namespace
}  // namespace ferry::quant
