// W8A8 linears at model level: make-model's int8 + scale files load and run; their logits
// track the same weights dequantized to f32 (only the int8 activation rounding differs);
// scalar and SIMD kernels agree; batching stays invariant; broken files give clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "isa_guard.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"

namespace ferry {
namespace {

std::string MakeW8A8(const std::string& dir, float input_scale) {
  const std::string path = dir + "/tiny-w8a8-" + std::to_string(input_scale) + ".gguf";
  SyntheticModelOptions o;
  o.preset = "tiny";
  o.type = DType::kI8;
  o.stddev = 0.08f;
  o.w8a8_input_scale = input_scale;
  EXPECT_TRUE(WriteSyntheticModel(path, o).ok());
  return path;
}

// Rewrites `in` to `out`: W8A8 weights dequantized to f32 (int8 * scale[row]) and their
// companions dropped; with keep_scales = false, W8A8 weights stay int8 but lose their scales.
void Rewrite(const std::string& in, const std::string& out, bool dequantize) {
  auto src = formats::OpenWeightSource(in);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  std::vector<formats::GgufTensorToWrite> tensors;
  std::vector<std::vector<float>> storage;
  storage.reserve((*src)->tensors().size());
  auto ends_with = [](const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  for (const formats::TensorRef& t : (*src)->tensors()) {
    if (ends_with(t.name, ".weight_scale") || ends_with(t.name, ".input_scale")) continue;
    if (t.dtype == DType::kI8 && dequantize) {
      const formats::TensorRef* sc = (*src)->FindTensor(t.name + "_scale");
      ASSERT_NE(sc, nullptr);
      const auto* q = static_cast<const int8_t*>(t.data);
      const auto* s = static_cast<const float*>(sc->data);
      std::vector<float>& f = storage.emplace_back(static_cast<size_t>(t.NumElements()));
      const int64_t cols = t.shape[1];
      for (int64_t i = 0; i < t.NumElements(); ++i)
        f[static_cast<size_t>(i)] = static_cast<float>(q[i]) * s[i / cols];
      tensors.push_back({t.name, DType::kF32, t.shape, f.data(), f.size() * sizeof(float)});
    } else {
      tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
    }
  }
  ASSERT_TRUE(formats::WriteGguf(out, (*src)->metadata(), tensors, {}).ok());
}

std::vector<float> Logits(const std::string& path, const std::vector<int32_t>& toks, int chunk,
                          ThreadPool* pool) {
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  auto m = CreateModel(**src);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, 128, c.n_kv_heads, c.head_dim);
  EXPECT_TRUE(kv.ok());
  std::vector<float> all(toks.size() * static_cast<size_t>(c.n_vocab));
  for (size_t s = 0; s < toks.size(); s += static_cast<size_t>(chunk)) {
    ForwardBatch b;
    const size_t e = std::min(toks.size(), s + static_cast<size_t>(chunk));
    for (size_t i = s; i < e; ++i) b.Add(toks[i], static_cast<int32_t>(i), 0, true);
    EXPECT_TRUE((*m)->Forward(b, *kv, all.data() + s * static_cast<size_t>(c.n_vocab), pool).ok());
  }
  return all;
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 53 + 7) % 400);
  return t;
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

TEST(W8A8Model, TracksDequantizedF32Weights) {
  const std::string dir = testing::TempDir();
  const std::string w8 = MakeW8A8(dir, 0.f), f32 = dir + "/tiny-w8a8-as-f32.gguf";
  Rewrite(w8, f32, /*dequantize=*/true);
  auto toks = Prompt(16);
  auto a = Logits(w8, toks, 16, nullptr), ref = Logits(f32, toks, 16, nullptr);
  // Same weights; each activation element moves by at most half an int8 step (1/254 of its
  // row maximum), which perturbs the logits by a few percent of their range after 2 layers.
  EXPECT_GT(MaxAbs(ref), 0.1);
  EXPECT_LE(MaxDiff(a, ref), 0.05 * MaxAbs(ref));
  EXPECT_GT(MaxDiff(a, ref), 0.0);  // the int8 activation path really ran
}

TEST(W8A8Model, ScalarAndSimdAgreeAndBatchingIsInvariant) {
  ferry::testing::ScopedIsa isa_guard;
  const std::string path = MakeW8A8(testing::TempDir(), 0.f);
  auto toks = Prompt(20);
  ThreadPool pool(2);
  ASSERT_TRUE(isa_guard.Set(kernels::Isa::kScalar));
  auto ref = Logits(path, toks, 20, nullptr);
  ASSERT_TRUE(isa_guard.Set(kernels::BestSupportedIsa()));
  auto whole = Logits(path, toks, 20, &pool);
  auto one = Logits(path, toks, 1, &pool);
  auto five = Logits(path, toks, 5, nullptr);
  EXPECT_EQ(whole, one);
  EXPECT_EQ(whole, five);
  // Int8 sums are exact; only float norms/attention differ in summation order, and that is
  // amplified by at most one int8 step (1/127 of the row maximum) where an activation sits on
  // a rounding boundary.
  EXPECT_LE(MaxDiff(ref, whole), MaxAbs(ref) / 127);
}

TEST(W8A8Model, StaticInputScaleIsUsed) {
  const std::string dir = testing::TempDir();
  auto toks = Prompt(8);
  auto dyn = Logits(MakeW8A8(dir, 0.f), toks, 8, nullptr);
  auto stat = Logits(MakeW8A8(dir, 0.05f), toks, 8, nullptr);
  for (float v : stat) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(MaxDiff(dyn, stat), 0.0);
  EXPECT_LE(MaxDiff(dyn, stat), 0.5 * MaxAbs(dyn));  // a coarse but sane scale
}

TEST(W8A8Model, MissingWeightScaleNamesTheTensor) {
  const std::string dir = testing::TempDir();
  const std::string bad = dir + "/no-scales.gguf";
  Rewrite(MakeW8A8(dir, 0.f), bad, /*dequantize=*/false);
  auto src = formats::OpenWeightSource(bad);
  ASSERT_TRUE(src.ok());
  auto m = CreateModel(**src);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("blk.0.attn_q.weight_scale"), std::string::npos)
      << m.status().ToString();
}

}  // namespace
}  // namespace ferry
