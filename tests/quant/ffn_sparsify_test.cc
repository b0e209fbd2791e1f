// `ferry sparsify`'s training (quant/ffn_sparsify.h) on the synthetic tiny model: thresholds hit
// the requested sparsity on the calibration rows and, within 2%, on held-out tokens (through
// the run-time model too); the predictor finds the neurons above threshold far better than
// chance on held-out rows; training is deterministic.
#include "quant/ffn_sparsify.h"

#include <gtest/gtest.h>

#include "engine/loaded_model.h"
#include "model/model.h"
#include "quant_test_util.h"

namespace ferry::quant {
namespace {

using testing::RandomTokens;

struct Trained {
  std::string dir, model_path;
  FloatModel m;
  FfnSparsityFile file;
};

Trained Train(int32_t rank = 32) {
  Trained t;
  t.dir = ::ferry::testing::TempDir();
  t.model_path = testing::WriteTinyModel(t.dir);
  auto src = formats::OpenWeightSource(t.model_path);
  EXPECT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  t.m = std::move(*m);
  CalibOptions co;
  co.n_windows = 8;
  co.ctx = 64;
  co.max_rows = 512;
  co.source = "random tokens";
  auto stats = Calibrate(t.m, RandomTokens(t.m.config.n_vocab, 8 * 64, 5), co, nullptr);
  EXPECT_TRUE(stats.ok());
  FfnSparsifyOptions o;
  o.train_sparsity = 0.5;
  o.rank = rank;
  auto f = TrainFfnSparsity(t.m, *stats, o, nullptr);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  t.file = std::move(*f);
  return t;
}

// FFN inputs of held-out tokens (other seed): per layer [n, dim].
std::vector<std::vector<float>> HeldOutRows(const FloatModel& m, int64_t n) {
  std::vector<std::vector<float>> rows(m.layers.size());
  m.Forward(RandomTokens(m.config.n_vocab, n, 99),
            [&](int32_t l, InputKind k, const float* x, int64_t nt, int64_t ni) {
              if (k == InputKind::kFfnIn)
                rows[static_cast<size_t>(l)].insert(rows[static_cast<size_t>(l)].end(), x, x + nt * ni);
            });
  return rows;
}

double FractionBelow(const std::vector<float>& act, float thr) {
  int64_t below = 0;
  for (float v : act) below += v < thr;
  return static_cast<double>(below) / static_cast<double>(act.size());
}

TEST(FfnSparsify, ThresholdsReachTheRequestedSparsityOnCalibrationAndHeldOutText) {
  Trained t = Train();
  ASSERT_EQ(t.file.layers.size(), t.m.layers.size());
  const int64_t n = 256, dim = t.m.config.dim;
  const auto held = HeldOutRows(t.m, n);
  for (int32_t l = 0; l < t.file.n_layers; ++l) {
    const auto act = AbsSiluGate(t.m, l, held[static_cast<size_t>(l)].data(), n, nullptr);
    for (double s : {0.25, 0.5, 0.7}) {
      const float thr = t.file.layers[static_cast<size_t>(l)].Threshold(s);
      EXPECT_NEAR(FractionBelow(act, thr), s, 0.02) << "held-out, layer " << l << " sparsity " << s;
    }
    EXPECT_EQ(t.file.layers[static_cast<size_t>(l)].thresholds.size(), size_t{kFfnGridSteps + 1});
    EXPECT_EQ(dim, t.file.dim);
  }

  // The run-time model skips that fraction too (its gate runs on f32 weights as well).
  const std::string side = t.dir + "/side.gguf";
  ASSERT_TRUE(SaveFfnSparsity(side, t.file).ok());
  LoadOptions lo;
  lo.sparsity.ffn_stats = side;
  lo.sparsity.ffn_sparsity = 0.5;
  auto lm = LoadModel(t.model_path, lo);
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  Model& model = *lm->model;
  const ModelConfig& c = model.config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, static_cast<int32_t>(n), c.n_kv_heads, c.head_dim);
  ASSERT_TRUE(kv.ok());
  ForwardBatch b;
  const auto toks = RandomTokens(c.n_vocab, n, 99);
  for (int32_t i = 0; i < n; ++i) b.Add(toks[static_cast<size_t>(i)], i, 0, i + 1 == n);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  SparsityStats stats;
  ForwardOptions fo;
  fo.stats = &stats;
  ASSERT_TRUE(model.Forward(b, *kv, logits.data(), nullptr, fo).ok());
  EXPECT_NEAR(stats.FfnSkippedFraction(), 0.5, 0.02);
}

TEST(FfnSparsify, PredictorFindsNeuronsAboveThresholdBetterThanChanceAndIsDeterministic) {
  Trained t = Train();
  const int64_t n = 256;
  const auto held = HeldOutRows(t.m, n);
  for (int32_t l = 0; l < t.file.n_layers; ++l) {
    const float* x = held[static_cast<size_t>(l)].data();
    const auto act = AbsSiluGate(t.m, l, x, n, nullptr);
    const double recall = PredictorRecall(t.file, l, x, act, n, 0.5);
    // Chance is 0.5 (half the neurons kept at random); a useless predictor stays near it. The
    // random model's gate has a flat spectrum, so rank 32 of 64 is a hard case (~0.7).
    EXPECT_GT(recall, 0.65) << "layer " << l;
    // A predictor with its factors scrambled is back near chance: the check can fail.
    FfnSparsityFile scrambled = t.file;
    auto& b = scrambled.layers[static_cast<size_t>(l)].pred_b;
    std::reverse(b.begin(), b.end());
    std::fill(scrambled.layers[static_cast<size_t>(l)].pred_bias.begin(),
              scrambled.layers[static_cast<size_t>(l)].pred_bias.end(), 0.f);
    EXPECT_LT(PredictorRecall(scrambled, l, x, act, n, 0.5), recall - 0.1) << "layer " << l;
  }
  // At full rank the predictor is the gate itself (up to the ridge): nearly perfect.
  Trained full = Train(static_cast<int32_t>(t.m.config.dim));
  for (int32_t l = 0; l < full.file.n_layers; ++l) {
    const float* x = held[static_cast<size_t>(l)].data();
    EXPECT_GT(PredictorRecall(full.file, l, x, AbsSiluGate(full.m, l, x, n, nullptr), n, 0.5), 0.95) << l;
  }
  Trained again = Train();
  for (size_t l = 0; l < t.file.layers.size(); ++l) {
    EXPECT_EQ(again.file.layers[l].pred_a, t.file.layers[l].pred_a);
    EXPECT_EQ(again.file.layers[l].pred_b, t.file.layers[l].pred_b);
    EXPECT_EQ(again.file.layers[l].thresholds, t.file.layers[l].thresholds);
  }
}

TEST(FfnSparsify, BadOptionsAreClearErrors) {
  Trained t = Train();
  CalibStats empty;
  FfnSparsifyOptions o;
  auto r = TrainFfnSparsity(t.m, empty, o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("layers"), std::string::npos);
  o.train_sparsity = 1.0;
  r = TrainFfnSparsity(t.m, testing::TinyCalibration(t.m), o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("--sparsity"), std::string::npos);
}

}  // namespace
}  // namespace ferry::quant
