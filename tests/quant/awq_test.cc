// AWQ: the scale search beats RTN on a layer with planted salient input channels, clipping
// never increases a layer's error, and the folds (by hand and the whole ApplyAwq) leave the
// full-precision outputs unchanged.
#include "quant/awq.h"

#include <gtest/gtest.h>

#include <random>

#include "quant/int4_quant.h"
#include "quant_test_util.h"

namespace ferry::quant {
namespace {

// X [n_rows, n_in]: most channels small, a few salient ones 30x larger (as LLM activations).
std::vector<float> PlantedInputs(std::mt19937& rng, int64_t n_rows, int64_t n_in,
                                 const std::vector<int64_t>& salient) {
  std::normal_distribution<float> d(0.f, 0.1f);
  std::vector<float> x(static_cast<size_t>(n_rows * n_in));
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t j = 0; j < n_in; ++j) x[static_cast<size_t>(t * n_in + j)] = d(rng);
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t j : salient) x[static_cast<size_t>(t * n_in + j)] *= 30.f;
  return x;
}

FloatLinear RandomLinear(std::mt19937& rng, int64_t n_out, int64_t n_in) {
  std::normal_distribution<float> d(0.f, 0.05f);
  FloatLinear l{n_out, n_in, std::vector<float>(static_cast<size_t>(n_out * n_in))};
  for (float& v : l.w) v = d(rng);
  return l;
}

std::vector<float> MeanAbs(const std::vector<float>& x, int64_t n_rows, int64_t n_in) {
  std::vector<float> m(static_cast<size_t>(n_in), 0.f);
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t j = 0; j < n_in; ++j)
      m[static_cast<size_t>(j)] +=
          std::fabs(x[static_cast<size_t>(t * n_in + j)]) / static_cast<float>(n_rows);
  return m;
}

TEST(Awq, PlantedSalientChannelsBeatRtn) {
  std::mt19937 rng(80);
  for (auto [n_in, group] : {std::pair<int64_t, int64_t>{256, 128}, {172, 128}, {172, 32}}) {
    SCOPED_TRACE("n_in " + std::to_string(n_in) + " group " + std::to_string(group));
    const int64_t n_rows = 256;
    const auto x = PlantedInputs(rng, n_rows, n_in, {3, 50, 77, n_in - 5});
    const FloatLinear a = RandomLinear(rng, 48, n_in), b = RandomLinear(rng, 32, n_in);
    const ScaleSearch ss = SearchAwqScale({&a, &b}, x.data(), n_rows, MeanAbs(x, n_rows, n_in), group, 20);
    EXPECT_GT(ss.alpha, 0.0);
    EXPECT_LT(ss.err, 0.7 * ss.err_rtn) << "awq " << ss.err << " rtn " << ss.err_rtn;
    // The variants (duo scaling; a module objective) never lose to RTN on their objective.
    const ScaleSearch duo =
        SearchAwqScale({&a, &b}, x.data(), n_rows, MeanAbs(x, n_rows, n_in), group, 20, {}, nullptr, true);
    EXPECT_LE(duo.err, duo.err_rtn);
    EXPECT_NEAR(duo.err_rtn, ss.err_rtn, 1e-12 * ss.err_rtn);
    const ModuleOutputFn sum_outputs = [](const std::vector<std::vector<float>>& outs, int64_t) {
      std::vector<float> y(outs[0].size() / 16);  // a many-to-one module: sums of 16 outputs
      for (size_t i = 0; i < outs[0].size(); ++i) y[i / 16] += outs[0][i];
      return y;
    };
    const ScaleSearch mod =
        SearchAwqScale({&a}, x.data(), n_rows, MeanAbs(x, n_rows, n_in), group, 20, {}, sum_outputs);
    EXPECT_LE(mod.err, mod.err_rtn);
    // The same comparison through the scaled layer the file stores: W*s on inputs X/s.
    FloatLinear as = a;
    ScaleColumns(as, ss.s);
    std::vector<float> xs = x;
    for (size_t i = 0; i < xs.size(); ++i) xs[i] /= ss.s[i % static_cast<size_t>(n_in)];
    EXPECT_LT(Int4OutputMse(as, xs.data(), n_rows, group, {}), Int4OutputMse(a, x.data(), n_rows, group, {}));
  }
}

TEST(Awq, ClipSearchNeverIncreasesError) {
  std::mt19937 rng(81);
  const int64_t n_in = 172, n_rows = 128;
  const auto x = PlantedInputs(rng, n_rows, n_in, {});
  FloatLinear l = RandomLinear(rng, 40, n_in);
  l.w[7] = 0.9f;  // an outlier weight stretches one group's range
  for (int64_t group : {32, 64, 128}) {
    const auto clip = SearchAwqClip(l, x.data(), n_rows, group, 20, 0.5f);
    ASSERT_EQ(clip.size(), static_cast<size_t>(40 * NumGroups(n_in, group)));
    for (float c : clip) ASSERT_TRUE(c <= 1.f && c >= 0.55f - 1e-6f);
    EXPECT_LE(Int4OutputMse(l, x.data(), n_rows, group, clip), Int4OutputMse(l, x.data(), n_rows, group, {}));
  }
}

TEST(Awq, FoldingLeavesFullPrecisionOutputsUnchanged) {
  const std::string dir = ferry::testing::TempDir();
  for (const char* preset : {"tiny", "tiny-qwen2"}) {
    SCOPED_TRACE(preset);
    auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir, preset));
    ASSERT_TRUE(src.ok());
    auto m = FloatModel::Load(**src);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const auto tokens = testing::RandomTokens(m->config.n_vocab, 40, 1);
    const auto before = m->Forward(tokens);
    // Arbitrary positive scales on every input (o's tied per v row, as GQA requires).
    std::mt19937 rng(82);
    std::lognormal_distribution<float> d(0.f, 0.7f);
    FloatModel f = *m;
    for (int32_t l = 0; l < f.config.n_layers; ++l) {
      for (InputKind in : kAllInputs) {
        const int64_t n_in = f.layers[static_cast<size_t>(l)][in == InputKind::kAttnIn    ? LinearKind::kQ
                                                              : in == InputKind::kAttnOut ? LinearKind::kO
                                                              : in == InputKind::kFfnIn   ? LinearKind::kGate
                                                                                          : LinearKind::kDown]
                                 .n_in;
        std::vector<float> s(static_cast<size_t>(n_in));
        if (in == InputKind::kAttnOut) {
          const auto tie = AttnOutTie(f.config);
          std::vector<float> per_row(static_cast<size_t>(f.config.n_kv_heads * f.config.head_dim));
          for (float& v : per_row) v = d(rng);
          for (size_t c = 0; c < s.size(); ++c) s[c] = per_row[static_cast<size_t>(tie[c])];
        } else {
          for (float& v : s) v = d(rng);
        }
        FoldAwqScales(f, l, in, s);
      }
    }
    EXPECT_NE(f.layers[0][LinearKind::kQ].w, m->layers[0][LinearKind::kQ].w);
    EXPECT_LT(testing::RelDiff(before, f.Forward(tokens)), 1e-5);
    // The whole AWQ transform (search + folds) before rounding: the same outputs.
    FloatModel g = *m;
    const CalibStats stats = testing::TinyCalibration(g);
    AwqOptions ao;
    ao.group = 32;
    ao.clip_rows = 64;
    auto r = ApplyAwq(g, stats, ao);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_LT(testing::RelDiff(before, g.Forward(tokens)), 1e-5);
    EXPECT_EQ(r->report.size(), static_cast<size_t>(4 * g.config.n_layers));
  }
}

}  // namespace
}  // namespace ferry::quant
