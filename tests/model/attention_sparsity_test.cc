// Attention sparsity in the model (model/attention_sparsity.h): head pruning equals a model
// whose pruned heads' W_o columns are zero, exact when off; value skipping and progressive
// precision counted exactly, the INT8 key copy kept as tokens are appended; clear errors.
#include "model/attention_sparsity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/metadata.h"
#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "model/kv_budget_cache.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"
#include "synthetic_layer_fixture.h"
#include "test_util.h"

namespace ferry {
namespace {

struct Loaded {
  std::unique_ptr<formats::WeightSource> src;
  std::unique_ptr<Model> model;
  SparsityStats stats;  // of the runs of this model
};

Loaded Load(const std::string& path, const SparsityOptions& sp = {}) {
  Loaded f;
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  f.src = std::move(*src);
  ModelOptions mo;
  mo.sparsity = sp;
  auto m = CreateModel(*f.src, mo);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (m.ok()) f.model = std::move(*m);
  return f;
}

std::string WriteTiny(const std::string& dir, const std::string& preset, DType type) {
  return testing::WriteSyntheticTestModel(dir, preset, type);
}

// A `ferry calibrate`-style file holding only blk.L.attn_heads.importance.
std::string WriteImportance(const std::string& dir, const std::vector<std::vector<float>>& imp) {
  const std::string path = dir + "/heads.gguf";
  Metadata md;
  md.SetString("general.architecture", "ferry-calibration");
  std::vector<formats::GgufTensorToWrite> t;
  for (size_t l = 0; l < imp.size(); ++l)
    t.push_back({"blk." + std::to_string(l) + ".attn_heads.importance",
                 DType::kF32,
                 {static_cast<int64_t>(imp[l].size())},
                 imp[l].data(),
                 imp[l].size() * sizeof(float)});
  EXPECT_TRUE(formats::WriteGguf(path, md, t).ok());
  return path;
}

// A copy of an f32 model whose W_o columns of the given heads are zero: those heads add nothing.
std::string WriteZeroedHeads(const std::string& path, const std::vector<std::vector<int32_t>>& zero) {
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok());
  const formats::WeightSource& s = **src;
  std::vector<std::vector<float>> copies;
  std::vector<formats::GgufTensorToWrite> t;
  const int32_t hd = 16;        // tiny presets: dim 64, 4 heads
  copies.reserve(zero.size());  // pointers into copies stay valid
  for (const formats::TensorRef& tr : s.tensors()) {
    const formats::TensorRef* r = &tr;
    const std::string& name = tr.name;
    t.push_back({r->name, r->dtype, r->shape, r->data, r->nbytes});
    for (size_t l = 0; l < zero.size(); ++l) {
      if (name != "blk." + std::to_string(l) + ".attn_output.weight") continue;
      EXPECT_EQ(r->dtype, DType::kF32);
      const auto* f = static_cast<const float*>(r->data);
      copies.emplace_back(f, f + r->nbytes / 4);
      const int64_t n_in = r->shape[1];
      for (int64_t row = 0; row < r->shape[0]; ++row)
        for (int32_t h : zero[l]) std::fill_n(copies.back().data() + row * n_in + int64_t{h} * hd, hd, 0.f);
      t.back().data = copies.back().data();
    }
  }
  const std::string out = path + ".zeroed.gguf";
  EXPECT_TRUE(formats::WriteGguf(out, s.metadata(), t).ok());
  return out;
}

// Logits of every position: a prefill of `prefill` tokens, then one token per pass.
std::vector<float> RunLogits(const Model& m, KvCache& kv, const std::vector<int32_t>& toks, size_t prefill,
                             ThreadPool* pool, SparsityStats* stats = nullptr) {
  ForwardOptions fo;
  fo.stats = stats;
  const int32_t nv = m.config().n_vocab;
  std::vector<float> all(toks.size() * static_cast<size_t>(nv));
  for (size_t s = 0; s < toks.size();) {
    const size_t e = s == 0 ? std::min(prefill, toks.size()) : s + 1;
    ForwardBatch b;
    for (size_t i = s; i < e; ++i) b.Add(toks[i], static_cast<int32_t>(i), 0, true);
    const Status st = m.Forward(b, kv, all.data() + s * static_cast<size_t>(nv), pool, fo);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    s = e;
  }
  return all;
}

std::vector<float> RunLogits(const Model& m, const std::vector<int32_t>& toks, size_t prefill,
                             ThreadPool* pool, SparsityStats* stats = nullptr) {
  auto kv =
      ContiguousKvCache::Create(m.config().n_layers, 1, 512, m.config().n_kv_heads, m.config().head_dim);
  EXPECT_TRUE(kv.ok());
  return RunLogits(m, *kv, toks, prefill, pool, stats);
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 37 + 11) % 500);
  return t;
}

TEST(HeadPruning, SelectsPerLayerAndKeepsOneHeadPerLayer) {
  const std::vector<std::vector<float>> imp = {{5, 1, 3, 4}, {0.5f, 2, 6, 7}};
  EXPECT_EQ(SelectKeptHeads(imp, 0.25), (std::vector<std::vector<int32_t>>{{0, 2, 3}, {1, 2, 3}}));
  EXPECT_EQ(SelectKeptHeads(imp, 0.0), (std::vector<std::vector<int32_t>>{{0, 1, 2, 3}, {0, 1, 2, 3}}));
  // 3.5 of 4 rounds to 4; each layer keeps its most important head.
  EXPECT_EQ(SelectKeptHeads(imp, 0.875), (std::vector<std::vector<int32_t>>{{0}, {3}}));
  // Per layer, not global: layer 1's heads all outrank layer 0's, yet each layer loses one.
  EXPECT_EQ(SelectKeptHeads({{1, 2, 3, 4}, {8, 7, 6, 5}}, 0.25),
            (std::vector<std::vector<int32_t>>{{1, 2, 3}, {0, 1, 2}}));
}

// Pruning equals the same model with those heads' W_o columns zeroed (llama and qwen2 with
// q/k/v biases, prefill then decode); a KV head whose query heads all go is skipped; counts exact.
TEST(HeadPruning, EqualsZeroedHeadsReferenceAndCountsWork) {
  const std::string dir = testing::TempDir();
  ThreadPool pool(2);
  // Half of each layer: layer 0 drops heads 0 and 1 (all of KV head 0), layer 1 heads 3 and 0.
  const std::string imp = WriteImportance(dir, {{0.1f, 0.2f, 5, 6}, {7, 8, 9, 0.3f}});
  for (const char* preset : {"tiny", "tiny-qwen2"}) {
    SCOPED_TRACE(preset);
    const std::string path = WriteTiny(dir, preset, DType::kF32);
    const std::string ref_path = WriteZeroedHeads(path, {{0, 1}, {0, 3}});
    SparsityOptions sp;
    sp.prune_heads = 0.5;
    sp.head_importance = imp;
    Loaded pruned = Load(path, sp), ref = Load(ref_path);
    const std::vector<int32_t> toks = Prompt(40);
    const std::vector<float> got = RunLogits(*pruned.model, toks, 32, &pool, &pruned.stats);
    const std::vector<float> want = RunLogits(*ref.model, toks, 32, &pool, &ref.stats);
    float max_abs = 0;
    for (float x : want) max_abs = std::max(max_abs, std::fabs(x));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + max_abs)) << i;
    // The pruned output really differs from the unpruned model.
    Loaded full = Load(path);
    const std::vector<float> dense = RunLogits(*full.model, toks, 32, &pool, &full.stats);
    double diff = 0;
    for (size_t i = 0; i < dense.size(); ++i) diff = std::max(diff, double{std::fabs(dense[i] - got[i])});
    EXPECT_GT(diff, 1e-3);

    const SparsityStats& s = pruned.stats;
    EXPECT_EQ(s.heads_pruned, 4);
    EXPECT_EQ(s.kv_heads_pruned, 1);
    // Passes: one of 32 tokens, then 8 of one. Keys attended summed over queries.
    const int64_t passes = 9, n_tok = 40, sum_keys = 40 * 41 / 2;
    // FLOPs counted by hand (2 per multiply-add), tiny: dim 64, 4 heads and 2 KV heads of 16.
    // A dense layer, per token: q 64x64 + k 64x32 + v 64x32 + W_o 64x64 = 12288 MACs, so
    // 40 tokens make 983040 FLOPs; attention: q.k and p.v are 16 MACs each per (query, head,
    // key), 64 FLOPs x 4 heads x 820 (query, key) pairs = 209920. Dense: 1192960 per layer.
    // Layer 0 keeps heads 2, 3 (1 KV head): (2048 + 1024 + 1024 + 2048) MACs x 2 x 40 + 64 x
    // 2 x 820 = 596480. Layer 1 keeps heads 1, 2 (both KV heads): 8192 x 80 + 104960 = 760320.
    ASSERT_EQ(n_tok, 40);
    ASSERT_EQ(sum_keys, 820);
    EXPECT_EQ(s.prune_flops, 2 * 1192960);
    EXPECT_EQ(s.prune_flops_skipped, (1192960 - 596480) + (1192960 - 760320));
    const int64_t layer_bytes = (64 + 32 + 32 + 64) * 64 * 4;  // q, k, v rows and W_o, f32
    EXPECT_EQ(s.prune_weight_bytes, passes * 2 * layer_bytes);
    // Layer 0: 32 q rows, 16 k and 16 v rows, 32 W_o columns; layer 1: 32 q rows, 32 columns.
    EXPECT_EQ(s.prune_weight_bytes_skipped, passes * ((32 + 16 + 16) * 64 + 64 * 32 + 32 * 64 + 64 * 32) * 4);
  }
}

// Every feature off (or at its exact setting) gives today's logits bit for bit.
TEST(AttentionSparsity, OffAndExactSettingsAreBitIdentical) {
  const std::string dir = testing::TempDir();
  ThreadPool pool(2);
  const std::string path = WriteTiny(dir, "tiny", DType::kF32);
  SparsityOptions sp;
  sp.prune_heads = 0;
  sp.head_importance = WriteImportance(dir, {{1, 2, 3, 4}, {1, 2, 3, 4}});
  sp.attn_skip_threshold = 0;
  sp.attn_progressive = false;
  sp.attn_progressive_margin = 0.5f;
  Loaded base = Load(path), off = Load(path, sp);
  const std::vector<int32_t> toks = Prompt(300);  // past a 256-key chunk
  const std::vector<float> a = RunLogits(*base.model, toks, 280, &pool, &base.stats),
                           b = RunLogits(*off.model, toks, 280, &pool, &off.stats);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  EXPECT_TRUE(sp.Exact());
  // A fraction too small to drop any head prunes nothing.
  sp.prune_heads = 0.01;
  Loaded tiny_f = Load(path, sp);
  const std::vector<float> c = RunLogits(*tiny_f.model, toks, 280, &pool, &tiny_f.stats);
  ASSERT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4));
  EXPECT_EQ(tiny_f.stats.heads_pruned, 0);
  EXPECT_EQ(tiny_f.stats.prune_flops_skipped, 0);
}

// Value skipping: every V row counted once per (query, layer, KV head, key); results close to
// dense; progressive with an unbounded margin recomputes everything and equals the f32 passes
// bit for bit; the INT8 copy follows appended tokens (decode == prefill bit for bit).
TEST(AttentionSparsity, SkipAndProgressiveCountsAndDecodeEqualsPrefill) {
  const std::string dir = testing::TempDir();
  ThreadPool pool(2);
  const std::string path = WriteTiny(dir, "tiny", DType::kF32);
  Loaded base = Load(path);
  const std::vector<int32_t> toks = Prompt(300);
  const std::vector<float> dense = RunLogits(*base.model, toks, 300, &pool, &base.stats);

  SparsityOptions skip;
  skip.attn_skip_threshold = 1e-3f;
  Loaded sk = Load(path, skip);
  const std::vector<float> got = RunLogits(*sk.model, toks, 300, &pool, &sk.stats);
  const SparsityStats& s = sk.stats;
  const int64_t rows = int64_t{2} * 2 * 300 * 301 / 2;  // layers x KV heads x keys over all queries
  EXPECT_EQ(s.attn_v_bytes, rows * 16 * 4);
  EXPECT_GT(s.attn_v_bytes_skipped, 0);
  EXPECT_LT(s.attn_v_bytes_skipped, s.attn_v_bytes);
  double max_diff = 0;
  for (size_t i = 0; i < dense.size(); ++i)
    max_diff = std::max(max_diff, double{std::fabs(dense[i] - got[i])});
  EXPECT_LT(max_diff, 0.05);

  SparsityOptions nearly;  // skips nothing: the exact multi-pass kernel
  nearly.attn_skip_threshold = 1e-30f;
  SparsityOptions prog;
  prog.attn_progressive = true;
  prog.attn_progressive_margin = 1e30f;
  Loaded a = Load(path, nearly), p = Load(path, prog);
  const std::vector<float> exact = RunLogits(*a.model, toks, 300, &pool, &a.stats),
                           all_f32 = RunLogits(*p.model, toks, 300, &pool, &p.stats);
  EXPECT_EQ(a.stats.attn_v_bytes_skipped, 0);
  ASSERT_EQ(0, std::memcmp(exact.data(), all_f32.data(), exact.size() * 4));
  EXPECT_EQ(p.stats.attn_k_rows_f32, rows);
  EXPECT_EQ(p.stats.attn_k_rows, rows);

  prog.attn_progressive_margin = 0.1f;  // a random model's scores are close together
  Loaded p2 = Load(path, prog);
  const std::vector<float> pre = RunLogits(*p2.model, toks, 300, &pool, &p2.stats);
  const SparsityStats& s2 = p2.stats;
  EXPECT_LT(s2.attn_k_rows_f32, s2.attn_k_rows);
  EXPECT_GT(s2.attn_k_rows_f32, 0);
  // Every row in INT8 (16 bytes + a 4-byte scale), the recomputed ones in f32 as well.
  EXPECT_EQ(s2.attn_k_bytes_read, s2.attn_k_rows * (16 + 4) + s2.attn_k_rows_f32 * 16 * 4);
  EXPECT_EQ(s2.attn_k_bytes_dense, rows * 16 * 4);
  Loaded p3 = Load(path, prog);
  const std::vector<float> dec =
      RunLogits(*p3.model, toks, 20, &pool, &p3.stats);  // 20, then one token per pass
  ASSERT_EQ(0, std::memcmp(pre.data(), dec.data(), pre.size() * 4));
  max_diff = 0;
  for (size_t i = 0; i < dense.size(); ++i)
    max_diff = std::max(max_diff, double{std::fabs(dense[i] - pre[i])});
  EXPECT_LT(max_diff, 0.05);
}

TEST(AttentionSparsity, ClearErrors) {
  const std::string dir = testing::TempDir();
  const std::string path = WriteTiny(dir, "tiny", DType::kF32);
  auto src = formats::OpenWeightSource(path);
  ASSERT_TRUE(src.ok());
  ModelOptions mo;
  mo.sparsity.prune_heads = 0.25;  // no --head-importance
  auto m = CreateModel(**src, mo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("ferry calibrate"), std::string::npos) << m.status().ToString();
  mo.sparsity.head_importance = WriteImportance(dir, {{1, 2, 3, 4}});  // one layer of two
  m = CreateModel(**src, mo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("blk.1.attn_heads.importance"), std::string::npos)
      << m.status().ToString();
  // q8_0 blocks (32) straddle heads of 16 columns.
  const std::string q8 = WriteTiny(dir, "tiny", DType::kQ8_0);
  auto src8 = formats::OpenWeightSource(q8);
  ASSERT_TRUE(src8.ok());
  mo.sparsity.head_importance = WriteImportance(dir, {{1, 2, 3, 4}, {1, 2, 3, 4}});
  m = CreateModel(**src8, mo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("head_dim"), std::string::npos) << m.status().ToString();
  // Progressive needs a cache with an INT8 key copy: the budgeted cache refuses.
  Loaded f = Load(path);
  SparsityOptions sp;
  sp.attn_progressive = true;
  sp.kv_policy = KvPolicy::kSink;
  sp.kv_budget = 64;
  auto kv = CreateKvCacheFor(f.model->config(), sp, 1, 128, 8);
  ASSERT_TRUE(kv.ok());
  ForwardBatch b;
  b.Add(5, 0, 0, true);
  std::vector<float> logits(static_cast<size_t>(f.model->config().n_vocab));
  ForwardOptions fo;
  fo.sparsity = &sp;  // per call: the model stays as loaded
  const Status st = f.model->Forward(b, **kv, logits.data(), nullptr, fo);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("--attn-progressive"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace ferry
