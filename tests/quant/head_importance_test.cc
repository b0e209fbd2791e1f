// `ferry calibrate`'s per-head importance (mean ||W_o[:, head] o_head||_2): recomputed from the
// recorded attention outputs, it scales with the head's W_o columns, survives the STATS file
// round trip, and the model layer reads it back (model/attention_sparsity.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/attention_sparsity.h"
#include "quant_test_util.h"

namespace ferry::quant {
namespace {

TEST(HeadImportance, MatchesAttentionOutputsThroughWoAndRoundTrips) {
  const std::string dir = ::ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  const ModelConfig& c = m->config;
  CalibOptions o;
  o.n_windows = 2;
  o.ctx = 32;
  o.max_rows = 64;  // every row kept: the attention outputs of all 64 tokens
  auto s = Calibrate(*m, testing::RandomTokens(c.n_vocab, 64, 3), o, nullptr);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->head_importance.size(), static_cast<size_t>(c.n_layers));
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const InputStats& out = s->At(l, InputKind::kAttnOut);  // rows: [64, q_dim]
    ASSERT_EQ(out.n_rows(), 64);
    const std::vector<float>& wo = m->layers[static_cast<size_t>(l)][LinearKind::kO].w;  // [dim, q_dim]
    for (int32_t h = 0; h < c.n_heads; ++h) {
      double sum = 0;
      for (int64_t t = 0; t < 64; ++t) {
        double sq = 0;
        for (int64_t r = 0; r < c.dim; ++r) {
          double d = 0;
          for (int32_t j = 0; j < c.head_dim; ++j)
            d += double{wo[static_cast<size_t>(r * q_dim + h * c.head_dim + j)]} *
                 out.rows[static_cast<size_t>(t * q_dim + h * c.head_dim + j)];
          sq += d * d;
        }
        sum += std::sqrt(sq);
      }
      EXPECT_NEAR(s->head_importance[static_cast<size_t>(l)][static_cast<size_t>(h)], sum / 64,
                  1e-5 * (1 + sum / 64));
    }
  }
  // Doubling head 1's W_o columns in layer 0 doubles its importance, others unchanged.
  FloatModel m2 = *m;
  std::vector<float>& wo = m2.layers[0][LinearKind::kO].w;
  for (int64_t r = 0; r < c.dim; ++r)
    for (int32_t j = 0; j < c.head_dim; ++j) wo[static_cast<size_t>(r * q_dim + c.head_dim + j)] *= 2;
  auto s2 = Calibrate(m2, testing::RandomTokens(c.n_vocab, 64, 3), o, nullptr);
  ASSERT_TRUE(s2.ok());
  EXPECT_NEAR(s2->head_importance[0][1], 2 * s->head_importance[0][1], 1e-5);
  EXPECT_NEAR(s2->head_importance[0][0], s->head_importance[0][0], 1e-6);

  const std::string path = dir + "/stats.gguf";
  ASSERT_TRUE(SaveCalibStats(path, *s).ok());
  auto back = LoadCalibStats(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->head_importance, s->head_importance);
  auto model_side = LoadHeadImportance(path, c.n_layers, c.n_heads);
  ASSERT_TRUE(model_side.ok()) << model_side.status().ToString();
  EXPECT_EQ(*model_side, s->head_importance);
}

}  // namespace
}  // namespace ferry::quant
