// Pruning: exact per-row sparsity, the 2:4 pattern, Wanda's activation-weighted choice, and
// calibration-driven pruning of a whole model.
#include "quant/prune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "quant_test_util.h"

namespace ferry::quant {
namespace {

FloatLinear Random(int64_t n_out, int64_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  FloatLinear l{n_out, n_in, std::vector<float>(static_cast<size_t>(n_out * n_in))};
  for (float& v : l.w) v = d(rng);
  return l;
}

TEST(Prune, MagnitudeHalfPerRow) {
  const FloatLinear orig = Random(7, 172, 1);
  FloatLinear l = orig;
  PruneOptions o;
  o.sparsity = 0.5;
  EXPECT_EQ(PruneMatrix(l, {}, o), 7 * 86);
  for (int64_t r = 0; r < 7; ++r) {
    float max_dropped = 0.f, min_kept = 1e30f;
    for (int64_t j = 0; j < 172; ++j) {
      const float w = l.w[static_cast<size_t>(r * 172 + j)], w0 = orig.w[static_cast<size_t>(r * 172 + j)];
      if (w == 0.f)
        max_dropped = std::max(max_dropped, std::fabs(w0));
      else
        min_kept = std::min(min_kept, std::fabs(w0));
    }
    EXPECT_LE(max_dropped, min_kept);
  }
}

TEST(Prune, TwoFourPatternIncludingRaggedTail) {
  FloatLinear l = Random(5, 66, 2);  // 16 groups of 4 and a tail of 2 (one zero)
  PruneOptions o;
  o.n = 2;
  o.m = 4;
  EXPECT_EQ(PruneMatrix(l, {}, o), 5 * (16 * 2 + 1));
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j0 = 0; j0 < 64; j0 += 4)
      EXPECT_EQ(std::count(l.w.begin() + r * 66 + j0, l.w.begin() + r * 66 + j0 + 4, 0.f), 2);
}

// N:M keeps N of every M (the usual convention): 1:4 zeroes three, 3:4 one, and each group
// keeps its largest magnitudes.
TEST(Prune, PatternKeepsNOfEveryM) {
  for (int n : {1, 3}) {
    FloatLinear l = Random(3, 16, 5);
    const FloatLinear before = l;
    PruneOptions o;
    o.n = n;
    o.m = 4;
    EXPECT_EQ(PruneMatrix(l, {}, o), 3 * 4 * (4 - n));
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t j0 = 0; j0 < 16; j0 += 4) {
        float min_kept = 1e30f, max_dropped = 0;
        for (int64_t j = j0; j < j0 + 4; ++j) {
          const float a = std::fabs(before.w[static_cast<size_t>(r * 16 + j)]);
          if (l.w[static_cast<size_t>(r * 16 + j)] == 0.f)
            max_dropped = std::max(max_dropped, a);
          else
            min_kept = std::min(min_kept, a);
        }
        EXPECT_LE(max_dropped, min_kept) << "row " << r << " group " << j0;
      }
  }
}

TEST(Prune, WandaKeepsSmallWeightsOnLoudChannels) {
  FloatLinear l{1, 4, {0.1f, 1.f, 0.9f, 0.2f}};
  FloatLinear mag = l;
  PruneOptions o;
  o.sparsity = 0.5;
  PruneMatrix(mag, {}, o);
  EXPECT_EQ(mag.w, (std::vector<float>{0.f, 1.f, 0.9f, 0.f}));
  o.method = PruneMethod::kWanda;
  PruneMatrix(l, {100.f, 1.f, 1.f, 1.f}, o);  // channel 0 carries 100x the activation norm
  EXPECT_EQ(l.w, (std::vector<float>{0.1f, 1.f, 0.f, 0.f}));
}

TEST(Prune, ModelNeedsCalibrationForWanda) {
  const std::string dir = ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  PruneOptions o;
  o.method = PruneMethod::kWanda;
  EXPECT_FALSE(PruneModel(*m, nullptr, o).ok());
  const CalibStats st = testing::TinyCalibration(*m);
  auto rep = PruneModel(*m, &st, o);
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->size(), static_cast<size_t>(7 * m->config.n_layers));
  for (const auto& r : *rep) EXPECT_NEAR(static_cast<double>(r.zeros) / r.total, 0.5, 0.01);
}

}  // namespace
}  // namespace ferry::quant
