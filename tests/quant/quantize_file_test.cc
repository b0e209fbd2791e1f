// Quantized files end to end: RTN/AWQ int4 GGUFs load in the runtime and compute what the
// fake-quantized float model computes; W8A8 files follow the I8 contract; quantization is
// deterministic (same inputs, same bytes, whatever the thread count).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/loaded_model.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "quant/awq.h"
#include "quant/int4_payloads.h"
#include "quant/int4_quant.h"
#include "quant/quant_writer.h"
#include "quant/smoothquant.h"
#include "quant_test_util.h"

namespace ferry::quant {
namespace {

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Logits of the runtime model over `tokens` (one sequence).
std::vector<float> RuntimeLogits(const std::string& path, const std::vector<int32_t>& tokens) {
  auto lm = LoadModel(path);
  EXPECT_TRUE(lm.ok()) << lm.status().ToString();
  const ModelConfig& c = lm->config();
  auto kv =
      ContiguousKvCache::Create(c.n_layers, 1, static_cast<int32_t>(tokens.size()), c.n_kv_heads, c.head_dim);
  EXPECT_TRUE(kv.ok());
  ForwardBatch b;
  for (size_t i = 0; i < tokens.size(); ++i) b.Add(tokens[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(c.n_vocab));
  EXPECT_TRUE(lm->model->Forward(b, *kv, logits.data(), nullptr).ok());
  return logits;
}

// Writes an int4 file of m (AWQ when stats is given) and returns its path.
std::string WriteInt4(const formats::WeightSource& src, FloatModel m, const CalibStats* stats, int64_t group,
                      const std::string& path) {
  QuantRecipe r;
  r.method = stats ? "awq" : "rtn";
  r.scheme = "w4a16";
  r.bits = 4;
  r.group_size = group;
  r.file_type = static_cast<int32_t>(Int4TypeForGroup(group));
  ClipMap clips;
  if (stats) {
    AwqOptions o;
    o.group = group;
    o.clip_rows = 64;
    auto res = ApplyAwq(m, *stats, o);
    EXPECT_TRUE(res.ok());
    clips = res->clip;
    r.calibration = stats->Describe();
  }
  EXPECT_TRUE(WriteQuantizedGguf(path, src, m, Int4Payloads(m, group, stats ? &clips : nullptr), r).ok());
  return path;
}

TEST(QuantizeFile, Int4FilesLoadAndMatchTheirFloatModel) {
  const std::string dir = ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  const auto tokens = testing::RandomTokens(m->config.n_vocab, 24, 4);
  const auto ref = m->Forward(tokens);
  for (int64_t group : {32, 64, 128}) {
    SCOPED_TRACE("group " + std::to_string(group));
    const std::string path = WriteInt4(**src, *m, nullptr, group, dir + "/rtn.gguf");
    auto q = formats::OpenWeightSource(path);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ((*q)->FindTensor("blk.0.ffn_down.weight")->dtype,
              Int4TypeForGroup(group));  // 192 wide: ragged at 128
    EXPECT_EQ((*q)->metadata().GetString("ferry.quant.method").value_or(""), "rtn");
    EXPECT_EQ((*q)->metadata().GetInt("ferry.quant.group_size").value_or(0), group);
    // The runtime's output equals the float model with the stored (dequantized) weights, up
    // to the runtime's q8_0 activation rounding.
    auto fq = FloatModel::Load(**q);
    ASSERT_TRUE(fq.ok());
    const auto want = fq->Forward(tokens);
    const auto got = RuntimeLogits(path, tokens);
    EXPECT_LT(testing::RelDiff(want, got), 0.03);
    EXPECT_GT(testing::RelDiff(ref, want), 0.0);
  }
}

TEST(QuantizeFile, AwqIsDeterministicAcrossThreadCounts) {
  const std::string dir = ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  CalibOptions co;
  co.n_windows = 3;
  co.ctx = 48;
  co.max_rows = 100;
  const auto tokens = testing::RandomTokens(m->config.n_vocab, 200, 9);
  ThreadPool one(1), two(2);
  auto s1 = Calibrate(*m, tokens, co, &one);
  auto s2 = Calibrate(*m, tokens, co, &two);
  ASSERT_TRUE(s1.ok() && s2.ok());
  const std::string a = WriteInt4(**src, *m, &*s1, 64, dir + "/a.gguf");
  const std::string b = WriteInt4(**src, *m, &*s2, 64, dir + "/b.gguf");
  const std::string ba = ReadBytes(a), bb = ReadBytes(b);
  ASSERT_FALSE(ba.empty());
  EXPECT_TRUE(ba == bb);
  // Saved and reloaded statistics give the same file too.
  ASSERT_TRUE(SaveCalibStats(dir + "/stats.gguf", *s1).ok());
  auto s3 = LoadCalibStats(dir + "/stats.gguf");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ(s3->At(1, InputKind::kFfnMid).rows, s1->At(1, InputKind::kFfnMid).rows);
  EXPECT_TRUE(ReadBytes(WriteInt4(**src, *m, &*s3, 64, dir + "/c.gguf")) == ba);
}

TEST(QuantizeFile, W8A8FilesFollowTheI8Contract) {
  const std::string dir = ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  CalibStats st = testing::TinyCalibration(*m);
  ASSERT_TRUE(ApplySmoothQuant(*m, st, 0.5).ok());
  for (bool static_act : {false, true}) {
    W8A8Options wo;
    wo.static_act = static_act;
    auto p = QuantizeW8A8(*m, &st, wo);
    ASSERT_TRUE(p.ok());
    QuantRecipe r;
    r.method = "smoothquant";
    r.scheme = "w8a8";
    r.alpha = 0.5;
    const std::string path = dir + "/w8a8.gguf";
    ASSERT_TRUE(WriteQuantizedGguf(path, **src, *m, *p, r).ok());
    auto q = formats::OpenWeightSource(path);
    ASSERT_TRUE(q.ok());
    const formats::TensorRef* w = (*q)->FindTensor("blk.1.ffn_down.weight");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->dtype, DType::kI8);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{64, 192}));
    const formats::TensorRef* sc = (*q)->FindTensor("blk.1.ffn_down.weight_scale");
    ASSERT_NE(sc, nullptr);
    EXPECT_EQ(sc->shape, (std::vector<int64_t>{64}));
    EXPECT_EQ((*q)->FindTensor("blk.1.ffn_down.input_scale") != nullptr, static_act);
    // Dequantized int8 rows are within half a step of the smoothed float weights.
    const auto* qi = static_cast<const int8_t*>(w->data);
    const auto* s = static_cast<const float*>(sc->data);
    const FloatLinear& lin = m->layers[1][LinearKind::kDown];
    for (int64_t o = 0; o < 64; ++o)
      for (int64_t j = 0; j < 192; ++j)
        ASSERT_LE(std::fabs(qi[o * 192 + j] * s[o] - lin.w[static_cast<size_t>(o * 192 + j)]),
                  0.5f * s[o] * 1.001f + 1e-9f);
    // Smoothed norms are stored (the runtime does no extra scaling).
    const auto* nw = static_cast<const float*>((*q)->FindTensor("blk.1.ffn_norm.weight")->data);
    EXPECT_EQ(0, std::memcmp(nw, m->layers[1].ffn_norm.data(), 64 * 4));
  }
}

// The quantization tools' float model has none of the newer architectures' flags (q/k norms,
// post norms, GeGLU, soft-caps, windows): it refuses them by name instead of computing llama.
TEST(QuantizeFile, FloatModelRefusesArchitecturesItDoesNotRun) {
  for (const char* preset : {"qwen3-tiny", "granite-tiny", "smollm3-tiny", "olmo2-tiny", "gemma2-tiny",
                             "gemma3-tiny", "phi3-tiny"}) {
    const std::string path = ::testing::TempDir() + "/refused-" + preset + ".gguf";
    SyntheticModelOptions o;
    o.preset = preset;
    o.type = DType::kF32;
    ASSERT_TRUE(WriteSyntheticModel(path, o).ok());
    auto src = formats::OpenWeightSource(path);
    ASSERT_TRUE(src.ok());
    auto fm = FloatModel::Load(**src);
    ASSERT_FALSE(fm.ok()) << preset;
    EXPECT_EQ(fm.status().code(), StatusCode::kUnsupported) << fm.status().ToString();
    const std::string arch = std::string(preset).substr(0, std::string(preset).find('-'));
    EXPECT_NE(fm.status().message().find("not '" + arch + "'"), std::string::npos) << fm.status().ToString();
  }
}

}  // namespace
}  // namespace ferry::quant
