// Model-level tests on a synthetic model: batching, KV reuse, ISA agreement, bad batches.
#include "model/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "formats/weight_source.h"
#include "isa_guard.h"
#include "kernels/kernels.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"

namespace ferry {
namespace {

struct Fixture {
  std::unique_ptr<formats::WeightSource> src;
  std::unique_ptr<Model> model;
};

Fixture MakeTiny(const std::string& dir, DType type) {
  std::string path = dir + "/tiny-" + DTypeName(type) + ".gguf";
  SyntheticModelOptions o;
  o.preset = "tiny";
  o.type = type;
  o.stddev = 0.08f;  // larger than the default so logits are far from flat
  EXPECT_TRUE(WriteSyntheticModel(path, o).ok());
  Fixture f;
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  f.src = std::move(*src);
  auto m = CreateModel(*f.src);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  f.model = std::move(*m);
  return f;
}

std::vector<int32_t> Prompt(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 37 + seed * 101) % 500);
  return t;
}

// Logits of every position, computing the prompt in chunks of `chunk` tokens. An f32 KV cache:
// these tests compare kernels and batching, and a K/V value on an f16 rounding boundary would
// add that format's step to the ISA comparison's tolerance.
std::vector<float> RunChunked(Model& m, const std::vector<int32_t>& toks, int chunk, ThreadPool* pool) {
  const int32_t nv = m.config().n_vocab;
  auto kv = ContiguousKvCache::Create(m.config().n_layers, 1, 256, m.config().n_kv_heads, m.config().head_dim,
                                      KvCacheTypes::F32());
  EXPECT_TRUE(kv.ok());
  std::vector<float> all(toks.size() * static_cast<size_t>(nv));
  for (size_t s = 0; s < toks.size(); s += static_cast<size_t>(chunk)) {
    ForwardBatch b;
    size_t e = std::min(toks.size(), s + static_cast<size_t>(chunk));
    for (size_t i = s; i < e; ++i) b.Add(toks[i], static_cast<int32_t>(i), 0, true);
    EXPECT_TRUE(m.Forward(b, *kv, all.data() + s * static_cast<size_t>(nv), pool).ok());
  }
  return all;
}

TEST(Model, ChunkedPrefillEqualsTokenByTokenExactly) {
  Fixture f = MakeTiny(testing::TempDir(), DType::kQ8_0);
  ThreadPool pool(2);
  auto toks = Prompt(40, 1);
  auto whole = RunChunked(*f.model, toks, 40, &pool);
  auto one = RunChunked(*f.model, toks, 1, &pool);
  auto seven = RunChunked(*f.model, toks, 7, nullptr);
  // Batch invariance: reduction order never depends on batch size or threads.
  EXPECT_EQ(whole, one);
  EXPECT_EQ(whole, seven);
}

TEST(Model, TwoSequencesInOneBatchEqualEachAlone) {
  Fixture f = MakeTiny(testing::TempDir(), DType::kF16);
  const Model& m = *f.model;
  const int32_t nv = m.config().n_vocab;
  auto a = Prompt(9, 2), b = Prompt(13, 3);
  auto alone_a = RunChunked(*f.model, a, 64, nullptr);
  auto alone_b = RunChunked(*f.model, b, 64, nullptr);
  auto kv = ContiguousKvCache::Create(m.config().n_layers, 2, 64, m.config().n_kv_heads, m.config().head_dim,
                                      KvCacheTypes::F32());  // as RunChunked's
  ASSERT_TRUE(kv.ok());
  ForwardBatch batch;
  for (size_t i = 0; i < a.size(); ++i) batch.Add(a[i], static_cast<int32_t>(i), 0, i + 1 == a.size());
  for (size_t i = 0; i < b.size(); ++i) batch.Add(b[i], static_cast<int32_t>(i), 1, i + 1 == b.size());
  std::vector<float> logits(2 * static_cast<size_t>(nv));
  ASSERT_TRUE(f.model->Forward(batch, *kv, logits.data(), nullptr).ok());
  for (int32_t j = 0; j < nv; ++j) {
    ASSERT_EQ(logits[static_cast<size_t>(j)], alone_a[(a.size() - 1) * nv + static_cast<size_t>(j)]);
    ASSERT_EQ(logits[static_cast<size_t>(nv + j)], alone_b[(b.size() - 1) * nv + static_cast<size_t>(j)]);
  }
}

// All positions' logits of `toks` under the scalar kernels and then under `fast` (left active):
// the largest absolute difference and the largest reference logit.
struct IsaGap {
  double max_abs = 0, max_ref = 0;
  bool fast_finite = true;
};
IsaGap ScalarVsFast(Model& m, const std::vector<int32_t>& toks, kernels::Isa fast) {
  ferry::testing::ScopedIsa isa_guard;
  const int chunk = static_cast<int>(toks.size());
  EXPECT_TRUE(isa_guard.Set(kernels::Isa::kScalar));
  const auto ref = RunChunked(m, toks, chunk, nullptr);
  EXPECT_TRUE(isa_guard.Set(fast));
  const auto got = RunChunked(m, toks, chunk, nullptr);
  IsaGap g;
  for (size_t i = 0; i < ref.size(); ++i) {
    g.fast_finite = g.fast_finite && std::isfinite(got[i]);
    g.max_abs = std::max(g.max_abs, static_cast<double>(std::fabs(ref[i] - got[i])));
    g.max_ref = std::max(g.max_ref, static_cast<double>(std::fabs(ref[i])));
  }
  return g;
}

TEST(Model, FastKernelsMatchScalarReference) {
  const kernels::Isa best = kernels::BestSupportedIsa();
  if (best == kernels::Isa::kScalar) GTEST_SKIP() << "no SIMD ISA on this CPU: nothing to compare";
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    Fixture f = MakeTiny(testing::TempDir(), type);
    const IsaGap g = ScalarVsFast(*f.model, Prompt(24, 4), best);
    // The ISAs differ only in float summation order (~1e-7 relative). That is amplified only
    // where an activation sits on a rounding boundary of the activation format the weight
    // type pairs with, and then by at most one step of that format: f32 none (1e-4 allows
    // for growth through the layers), f16 one half-precision ulp (2^-11 relative, doubled),
    // q8_0 one quantization step (1/127 of the block maximum).
    const double tol = type == DType::kF32 ? 1e-4 : type == DType::kF16 ? 2.0 / 2048 : 1.0 / 127;
    EXPECT_LE(g.max_abs, tol * g.max_ref) << DTypeName(type);
  }
}

// make-model's q4_k_m follows llama.cpp's Q4_K_M recipe tensor by tensor, and the file runs
// with the same logits under the scalar reference and the fast kernels.
TEST(Model, MakeModelQ4_K_MFollowsLlamaCppsRecipe) {
  const std::string path = testing::TempDir() + "/draft-q4_k_m.gguf";
  SyntheticModelOptions o;
  o.preset = "smollm-draft";  // rows of 256 and 768 (whole K-quant blocks), 4 layers, tied head
  o.type = DType::kQ4_K;
  o.q4_k_m = true;
  ASSERT_TRUE(WriteSyntheticModel(path, o).ok());
  auto src = formats::OpenWeightSource(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  // use_more_bits over 4 layers picks layer 2 ((2 - 4/8) % 3 == 2) and layer 3 (>= 7*4/8).
  const std::vector<std::pair<std::string, DType>> want = {
      {"token_embd.weight", DType::kQ6_K},  // the tied head
      {"blk.0.attn_v.weight", DType::kQ4_K},  {"blk.1.ffn_down.weight", DType::kQ4_K},
      {"blk.2.attn_v.weight", DType::kQ6_K},  {"blk.2.ffn_down.weight", DType::kQ6_K},
      {"blk.3.attn_v.weight", DType::kQ6_K},  {"blk.3.ffn_down.weight", DType::kQ6_K},
      {"blk.3.attn_q.weight", DType::kQ4_K},  {"blk.3.ffn_up.weight", DType::kQ4_K},
      {"blk.0.attn_norm.weight", DType::kF32}};
  for (const auto& [name, type] : want) {
    const formats::TensorRef* t = (*src)->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, type) << name << " is " << DTypeName(t->dtype);
  }
  EXPECT_EQ((*src)->metadata().GetInt("general.file_type").value_or(0), 15);  // MOSTLY_Q4_K_M

  auto m = CreateModel(**src);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const kernels::Isa best = kernels::BestSupportedIsa();
  const IsaGap g = ScalarVsFast(**m, Prompt(12, 5), best);
  ASSERT_TRUE(g.fast_finite);
  EXPECT_GT(g.max_ref, 0.0);
  // The dot kernels agree with the scalar ones to ~1e-7 (Dot.EveryIsaMatchesRef); at model
  // level that stays ~1e-7 unless an activation sits on a rounding boundary of its q8_K block.
  // A crossing early in a 4-layer model moves every later logit by up to a few percent of the
  // largest (seen: 0.5-2.3% over seeds, for q4_k alone as for this mix), hence 5%. A wrong
  // scale or block layout would be off by the logits' own size.
  EXPECT_LE(g.max_abs, 0.05 * g.max_ref) << "scalar vs " << kernels::IsaName(best);
}

TEST(Model, RejectsBadBatches) {
  Fixture f = MakeTiny(testing::TempDir(), DType::kF32);
  auto kv = ContiguousKvCache::Create(f.model->config().n_layers, 1, 8, f.model->config().n_kv_heads,
                                      f.model->config().head_dim);
  ASSERT_TRUE(kv.ok());
  std::vector<float> logits(static_cast<size_t>(f.model->config().n_vocab));
  ForwardBatch b;
  b.Add(100000, 0, 0, true);
  EXPECT_EQ(f.model->Forward(b, *kv, logits.data(), nullptr).code(), StatusCode::kInvalidArgument);
  b.Clear();
  b.Add(5, 8, 0, true);
  EXPECT_EQ(f.model->Forward(b, *kv, logits.data(), nullptr).code(), StatusCode::kOutOfRange);
  b.Clear();
  b.Add(5, 0, 1, true);
  EXPECT_EQ(f.model->Forward(b, *kv, logits.data(), nullptr).code(), StatusCode::kInvalidArgument);
  b.Clear();
  b.Add(5, 0, 0, false);
  b.Add(6, 2, 0, true);
  EXPECT_EQ(f.model->Forward(b, *kv, logits.data(), nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(ModelConfig, ValidatesShapes) {
  Metadata md;
  md.SetString("general.architecture", "llama");
  md.SetInt("llama.embedding_length", 64);
  md.SetInt("llama.block_count", 2);
  md.SetInt("llama.feed_forward_length", 128);
  md.SetInt("llama.attention.head_count", 4);
  md.SetInt("llama.attention.head_count_kv", 3);
  md.SetInt("llama.vocab_size", 100);
  auto c = ModelConfig::FromMetadata(md);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("head_count_kv"), std::string::npos);
  md.SetInt("llama.attention.head_count_kv", 2);
  EXPECT_TRUE(ModelConfig::FromMetadata(md).ok());
  md.SetString("general.architecture", "gpt-j");  // unknown: named, with the supported ones
  const Status unknown = ModelConfig::FromMetadata(md).status();
  EXPECT_EQ(unknown.code(), StatusCode::kUnsupported);
  EXPECT_NE(unknown.message().find("'gpt-j'"), std::string::npos) << unknown.message();
  EXPECT_NE(unknown.message().find("llama"), std::string::npos) << unknown.message();
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

std::unique_ptr<formats::WeightSource> OpenTinyQwen2(const std::string& dir, float bias_stddev) {
  std::string path = dir + "/qwen2-" + std::to_string(bias_stddev) + ".gguf";
  SyntheticModelOptions o;
  o.preset = "tiny-qwen2";
  o.type = DType::kF32;
  o.stddev = 0.08f;
  o.bias_stddev = bias_stddev;
  EXPECT_TRUE(WriteSyntheticModel(path, o).ok());
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  return std::move(*src);
}

// Relabels a qwen2 source as llama (same keys under llama.*), optionally with neox RoPE.
void RelabelAsLlama(formats::WeightSource& src, bool neox) {
  Metadata& md = src.mutable_metadata();
  std::vector<std::pair<std::string, MetaValue>> renamed;
  for (const auto& [k, v] : md.entries())
    if (k.rfind("qwen2.", 0) == 0) renamed.emplace_back("llama." + k.substr(6), v);
  for (auto& [k, v] : renamed) md.Set(k, v);
  md.SetString("general.architecture", "llama");
  md.SetBool("ferry.rope.neox", neox);
}

TEST(Qwen2, IsLlamaWithNeoxRopeAndBiases) {
  const std::string dir = testing::TempDir();
  auto toks = Prompt(20, 5);
  auto qwen_src = OpenTinyQwen2(dir, 0.0f);
  auto qwen = CreateModel(*qwen_src);
  ASSERT_TRUE(qwen.ok()) << qwen.status().ToString();
  EXPECT_TRUE((*qwen)->config().rope_neox);
  auto ref = RunChunked(**qwen, toks, 20, nullptr);

  auto neox_src = OpenTinyQwen2(dir, 0.0f);
  RelabelAsLlama(*neox_src, true);
  auto neox = CreateModel(*neox_src);
  ASSERT_TRUE(neox.ok());
  EXPECT_EQ(RunChunked(**neox, toks, 20, nullptr), ref);  // zero biases: same function

  auto normal_src = OpenTinyQwen2(dir, 0.0f);
  RelabelAsLlama(*normal_src, false);
  auto normal = CreateModel(*normal_src);
  ASSERT_TRUE(normal.ok());
  EXPECT_NE(RunChunked(**normal, toks, 20, nullptr), ref);  // the RoPE layout matters

  auto biased_src = OpenTinyQwen2(dir, 0.5f);
  auto biased = CreateModel(*biased_src);
  ASSERT_TRUE(biased.ok());
  EXPECT_NE(RunChunked(**biased, toks, 20, nullptr), ref);  // biases are applied
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// Repacked weights compute the same function as weights used in place from the file: only the
// float summation order differs, so the bound is the one derived in FastKernelsMatchScalarReference.
TEST(Model, RepackedWeightsMatchInPlaceWeights) {
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    Fixture f = MakeTiny(testing::TempDir(), type);
    auto in_place = CreateModel(*f.src, ModelOptions{/*repack_weights=*/false});
    ASSERT_TRUE(in_place.ok());
    auto toks = Prompt(24, 6);
    auto packed = RunChunked(*f.model, toks, 24, nullptr);  // MakeTiny uses the default: repacked
    auto plain = RunChunked(**in_place, toks, 24, nullptr);
    double max_abs = 0, max_ref = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(plain[i] - packed[i])));
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(plain[i])));
    }
    EXPECT_LE(max_abs, max_ref / 127) << DTypeName(type);
    EXPECT_GT(max_ref, 0.0);
  }
}

// A layout choice must not change results (issue 19): q4_K and q6_K sum in one order packed
// and in place (docs/formats.md 8.2), so a Q4_K_M file (q4_K and q6_K matrices, a q6_K tied
// head) gives the same logits, bit for bit, with --no-repack and repacked, at any chunking.
TEST(Model, Q4_K_MRepackedEqualsInPlaceBits) {
  const std::string path = testing::TempDir() + "/repack-q4_k_m.gguf";
  SyntheticModelOptions o;
  o.preset = "smollm-draft";  // rows of 256 and 768: every matrix packs
  o.type = DType::kQ4_K;
  o.q4_k_m = true;
  ASSERT_TRUE(WriteSyntheticModel(path, o).ok());
  auto src = formats::OpenWeightSource(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto packed = CreateModel(**src);
  auto in_place = CreateModel(**src, ModelOptions{/*repack_weights=*/false});
  ASSERT_TRUE(packed.ok() && in_place.ok());
  ThreadPool pool(2);
  const auto toks = Prompt(12, 7);
  const auto want = RunChunked(**in_place, toks, 12, nullptr);
  for (int chunk : {12, 5}) {
    const auto got = RunChunked(**packed, toks, chunk, chunk == 5 ? &pool : nullptr);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
          << "chunk " << chunk << " logit " << i << ": repacked " << got[i] << " in place " << want[i];
  }
}

}  // namespace
}  // namespace ferry
