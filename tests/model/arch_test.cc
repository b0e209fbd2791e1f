// The architectures beyond llama (qwen3, qwen3moe, granite, smollm3, olmo2, gemma2, gemma3, phi3, gpt-oss,
// deepseek2):
// each tiny preset against the plain scalar reference of arch_reference.h on every ISA table, the config each
// reads from its GGUF keys, and the Hugging Face folder of the same weights giving the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "arch_reference.h"
#include "formats/safetensors.h"
#include "formats/weight_source.h"
#include "isa_guard.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"
#include "synthetic_layer_fixture.h"
#include "test_util.h"

namespace ferry {
namespace {

const char* const kTinyPresets[] = {"qwen3-tiny",   "qwen3moe-tiny", "granite-tiny", "smollm3-tiny",
                                    "olmo2-tiny",   "gemma2-tiny",   "gemma3-tiny",  "phi3-tiny",
                                    "gpt-oss-tiny", "deepseek2-tiny"};
// Longer than the gemma and gpt-oss presets' sliding window (32), so the window masks keys.
constexpr int kPromptLen = 48;

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 37 + 11) % 500);
  return t;
}

// Logits [n, vocab] of the whole prompt in one batch, on an f32 KV cache of `context` positions.
std::vector<float> Logits(const Model& m, const std::vector<int32_t>& toks, int32_t context = 64) {
  const ModelConfig& c = m.config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, context, c.n_kv_heads, c.head_dim, KvCacheTypes::F32());
  EXPECT_TRUE(kv.ok());
  ForwardBatch b;
  for (size_t i = 0; i < toks.size(); ++i) b.Add(toks[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> out(toks.size() * static_cast<size_t>(c.n_vocab));
  Status st = m.Forward(b, *kv, out.data(), nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// The reference computes gemma's GELU in double; the models' default, ggml's fp16 table, is a
// step function of its input (tested in ops_test and GemmaRunsLlamaCppsFp16GeluByDefault), so the
// reference comparisons load the exact one.
ModelOptions ExactGelu() {
  ModelOptions o;
  o.exact_gelu = true;
  return o;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// The model's logits for toks on every ISA against the scalar reference forward: within 1e-4 of
// the largest reference logit, which must be far from flat (so the test can see a wrong layer).
void ExpectEveryIsaMatchesReference(const formats::WeightSource& src, const std::vector<int32_t>& toks,
                                    const std::string& label) {
  const std::vector<double> ref = testing::ReferenceForward(src).Run(toks);
  for (kernels::Isa isa : testing::TestIsas()) {
    testing::ScopedIsa guard(isa);
    auto m = CreateModel(src, ExactGelu());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const std::vector<float> got = Logits(**m, toks);
    ASSERT_EQ(got.size(), ref.size());
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
      max_ref = std::max(max_ref, std::fabs(ref[i]));
    }
    EXPECT_GT(max_ref, 0.1) << label;
    EXPECT_LE(max_diff, 1e-4 * max_ref) << label << " on " << kernels::IsaName(isa);
  }
}

// Every layer of every architecture, on every ISA, against the scalar reference: the f32 file
// leaves only float summation order between them.
TEST(Architectures, TinyPresetsMatchScalarReference) {
  for (const char* preset : kTinyPresets) {
    const std::string path = testing::WriteSyntheticTestModel(testing::TempDir(), preset, DType::kF32);
    testing::OpenedModel om = testing::OpenTestModel(path);
    ASSERT_TRUE(om.src);
    ExpectEveryIsaMatchesReference(*om.src, Prompt(kPromptLen), preset);
  }
}

TEST(Architectures, ConfigFromGgufKeys) {
  auto open = [](const char* preset) {
    return testing::OpenTestModel(testing::WriteSyntheticTestModel(testing::TempDir(), preset, DType::kF32))
        .cfg;
  };
  const ModelConfig q3 = open("qwen3-tiny");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_TRUE(q3.rope_neox);
  EXPECT_EQ(q3.head_dim, 32);  // attention.key_length, not dim / heads = 16
  EXPECT_TRUE(q3.nope_layers.empty());
  const ModelConfig moe = open("qwen3moe-tiny");
  EXPECT_TRUE(moe.qk_norm && moe.IsMoe() && moe.expert_weights_norm);
  EXPECT_EQ(moe.n_expert, 8);
  EXPECT_EQ(moe.shared_expert_ffn_dim, 0);
  const ModelConfig g = open("granite-tiny");
  EXPECT_FALSE(g.rope_neox || g.qk_norm);
  EXPECT_FLOAT_EQ(g.embedding_scale, 12.0f);
  EXPECT_FLOAT_EQ(g.AttentionScale(), 0.015625f);
  EXPECT_FLOAT_EQ(g.residual_scale, 0.22f);
  EXPECT_FLOAT_EQ(g.logit_scale, 8.0f);
  const ModelConfig s = open("smollm3-tiny");
  EXPECT_EQ(s.nope_layers, (std::vector<uint8_t>{0, 0, 0, 1}));  // llama.cpp: every 4th layer
  EXPECT_FALSE(s.UsesRope(3));
  EXPECT_TRUE(s.UsesRope(2));
  const ModelConfig o = open("olmo2-tiny");
  EXPECT_TRUE(o.qk_norm_whole && o.post_norms && o.rope_neox);
  EXPECT_FALSE(o.qk_norm || o.pre_norms);
  const ModelConfig g2 = open("gemma2-tiny");
  EXPECT_TRUE(g2.pre_norms && g2.post_norms && g2.gelu_ffn && g2.rope_neox && !g2.qk_norm);
  EXPECT_EQ(g2.sliding_window, 32);
  EXPECT_EQ(g2.swa_layers, (std::vector<uint8_t>{1, 0, 1, 0}));  // llama.cpp: pattern 2
  EXPECT_FLOAT_EQ(g2.embedding_scale, 8.0f);                     // sqrt(64)
  EXPECT_FLOAT_EQ(g2.attn_softcap, 0.05f);
  EXPECT_FLOAT_EQ(g2.final_softcap, 0.5f);
  EXPECT_FLOAT_EQ(g2.rope_theta_swa, g2.rope_theta);
  const ModelConfig g3 = open("gemma3-tiny");
  EXPECT_TRUE(g3.qk_norm && g3.gelu_ffn && g3.post_norms);
  EXPECT_EQ(g3.swa_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));  // 5 sliding : 1 global
  EXPECT_FLOAT_EQ(g3.rope_theta_swa, 10000.0f);                        // local base; global 1e6
  EXPECT_FLOAT_EQ(g3.rope_theta, 1000000.0f);
  EXPECT_EQ(g3.attn_softcap, 0.0f);
  EXPECT_EQ(g3.final_softcap, 0.0f);
  const ModelConfig phi = open("phi3-tiny");
  EXPECT_TRUE(phi.fused_gate_up && phi.rope_neox && phi.pre_norms && !phi.post_norms && !phi.qk_norm);
  EXPECT_EQ(phi.head_dim, 16);
  EXPECT_EQ(phi.rot_dim, 12);  // partial rotary
  EXPECT_EQ(phi.n_ctx_orig, 64);
  EXPECT_FLOAT_EQ(phi.rope_attn_factor, std::sqrt(1.5f));  // sqrt(1 + ln(512 / 64) / ln(64))
  EXPECT_FALSE(phi.UsesLongRopeFactors(64));
  EXPECT_TRUE(phi.UsesLongRopeFactors(65));
  EXPECT_EQ(phi.sliding_window, 0);
  const ModelConfig oss = open("gpt-oss-tiny");
  EXPECT_TRUE(oss.rope_neox && oss.attn_sinks && oss.swiglu_oai && oss.expert_softmax_after_topk &&
              oss.rope_yarn);
  EXPECT_FALSE(oss.expert_weights_norm || oss.post_norms || oss.qk_norm);
  EXPECT_EQ(oss.sliding_window, 32);
  EXPECT_EQ(oss.swa_layers, (std::vector<uint8_t>{1, 0, 1, 0}));  // llama.cpp: pattern 2, layer 0 slides
  EXPECT_EQ(oss.n_expert, 8);
  EXPECT_EQ(oss.n_expert_used, 4);
  EXPECT_EQ(oss.head_dim, 32);
  EXPECT_EQ(oss.n_ctx_orig, 128);
  EXPECT_FLOAT_EQ(oss.rope_freq_scale, 0.25f);  // 1 / factor
  EXPECT_FLOAT_EQ(oss.rope_freq_scale_swa, 0.25f);
  EXPECT_FLOAT_EQ(oss.rope_theta_swa, oss.rope_theta);
  EXPECT_NEAR(oss.rope_attn_factor, 1.0 + 0.1 * std::log(4.0), 1e-6);  // YaRN's magnitude scale
  const ModelConfig ds = open("deepseek2-tiny");
  EXPECT_TRUE(ds.IsMla() && ds.IsMoe() && ds.rope_yarn);
  EXPECT_FALSE(ds.rope_neox || ds.expert_weights_norm);
  EXPECT_EQ(ds.kv_lora_rank, 64);
  EXPECT_EQ(ds.q_lora_rank, 32);
  EXPECT_EQ(ds.n_kv_heads, 1);      // one latent row per token
  EXPECT_EQ(ds.head_dim, 64 + 32);  // kv_lora_rank + rope dims
  EXPECT_EQ(ds.mla_k_dim, 64);
  EXPECT_EQ(ds.MlaNopeDim(), 32);
  EXPECT_EQ(ds.mla_v_dim, 32);
  EXPECT_EQ(ds.n_dense_layers, 1);
  EXPECT_FALSE(ds.IsMoeLayer(0));
  EXPECT_TRUE(ds.IsMoeLayer(1));
  EXPECT_EQ(ds.ffn_dim, 128);
  EXPECT_EQ(ds.expert_ffn_dim, 32);
  EXPECT_EQ(ds.shared_expert_ffn_dim, 32);  // one shared expert
  EXPECT_FLOAT_EQ(ds.expert_weights_scale, 2.5f);
  // YaRN with mscale_all_dim 0.707: unit RoPE magnitude, scores times mscale^2 / sqrt(64).
  EXPECT_NEAR(ds.rope_attn_factor, 1.0, 1e-6);
  const double mscale = 1.0 + 0.1 * 0.707 * std::log(4.0);
  EXPECT_NEAR(ds.AttentionScale(), mscale * mscale / 8.0, 1e-6);
}

// The preset's metadata without `key` (one llama.cpp reads with no default) is an error naming it.
void ExpectRequiredKey(const char* preset, const std::string& key) {
  auto src =
      formats::OpenWeightSource(testing::WriteSyntheticTestModel(testing::TempDir(), preset, DType::kF32));
  ASSERT_TRUE(src.ok());
  Metadata md;
  for (const auto& [k, v] : (*src)->metadata().entries())
    if (k != key) md.Set(k, v);
  auto cfg = ModelConfig::FromMetadata(md);
  ASSERT_FALSE(cfg.ok()) << key;
  EXPECT_NE(cfg.status().message().find(key), std::string::npos) << cfg.status().ToString();
}

// The preset's metadata with `key` set to `value` is refused by a message naming the key.
void ExpectRefusedWith(const char* preset, const std::string& key, uint64_t value) {
  auto src =
      formats::OpenWeightSource(testing::WriteSyntheticTestModel(testing::TempDir(), preset, DType::kF32));
  ASSERT_TRUE(src.ok());
  Metadata md = (*src)->metadata();
  md.SetUint(key, value);
  auto cfg = ModelConfig::FromMetadata(md);
  ASSERT_FALSE(cfg.ok()) << key;
  EXPECT_NE(cfg.status().message().find(key), std::string::npos) << cfg.status().ToString();
}

TEST(Architectures, GptOssNeedsSlidingWindow) {
  ExpectRequiredKey("gpt-oss-tiny", "gpt-oss.attention.sliding_window");
}

// deepseek2: the latent rank is required; a file without the MLA head sizes (the old unsplit
// attn_kv_b conversion) and DeepSeek-V3's sigmoid routing are refused by name; so are tensor
// parallelism and sparsity options, which MLA's shared latent row does not split.
TEST(Architectures, Deepseek2RefusesWhatItCannotRun) {
  ExpectRequiredKey("deepseek2-tiny", "deepseek2.attention.kv_lora_rank");
  ExpectRequiredKey("deepseek2-tiny", "deepseek2.attention.key_length_mla");
  ExpectRefusedWith("deepseek2-tiny", "deepseek2.expert_gating_func", 2);
  auto src = formats::OpenWeightSource(
      testing::WriteSyntheticTestModel(testing::TempDir(), "deepseek2-tiny", DType::kF32));
  ASSERT_TRUE(src.ok());
  ModelOptions opts;
  opts.sparsity.attn_skip_threshold = 0.01f;
  auto sparse = CreateModel(**src, opts);
  ASSERT_FALSE(sparse.ok());
  EXPECT_NE(sparse.status().message().find("latent"), std::string::npos) << sparse.status().ToString();
}

// gpt-oss with MXFP4 experts (make-model's mxfp4: llama.cpp's MXFP4_MOE, the rest q8_0) on every
// ISA against the reference on the same weights, the reference rounding each matmul's input to
// q8_0 as llama.cpp (and Ferry) do. Then only summation order differs, as for f32, until some
// activation falls within float error of a q8_0 rounding boundary: that one quantum then moves
// every later position through attention (here from position 18 on, by ~1% of the logits), so
// the prompt stops before it.
TEST(Architectures, GptOssMxfp4ExpertsMatchScalarReference) {
  const std::string path =
      testing::WriteSyntheticTestModel(testing::TempDir(), "gpt-oss-tiny", DType::kMXFP4);
  testing::OpenedModel om = testing::OpenTestModel(path);
  ASSERT_TRUE(om.src);
  EXPECT_EQ(om.src->FindTensor("blk.0.ffn_up_exps.weight")->dtype, DType::kMXFP4);
  EXPECT_EQ(om.src->FindTensor("blk.0.ffn_down_exps.weight")->dtype, DType::kMXFP4);
  EXPECT_EQ(om.src->FindTensor("blk.0.attn_q.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(om.src->FindTensor("output.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(om.src->FindTensor("blk.0.ffn_gate_inp.weight")->dtype, DType::kF32);
  ExpectEveryIsaMatchesReference(*om.src, Prompt(16), "gpt-oss-tiny mxfp4");
}

// LongRoPE: a cache longer than the original context (64) rotates with the long factors, on
// every ISA, as the reference does; the short and long logits differ, so the choice is seen.
TEST(Architectures, Phi3LongRopeFactorsFollowTheContext) {
  testing::OpenedModel om =
      testing::OpenTestModel(testing::WriteSyntheticTestModel(testing::TempDir(), "phi3-tiny", DType::kF32));
  ASSERT_TRUE(om.src);
  const auto toks = Prompt(kPromptLen);
  const std::vector<double> ref_long = testing::ReferenceForward(*om.src).Run(toks, 128);
  for (kernels::Isa isa : testing::TestIsas()) {
    testing::ScopedIsa guard(isa);
    auto m = CreateModel(*om.src);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const std::vector<float> got = Logits(**m, toks, 128), short_ctx = Logits(**m, toks, 64);
    double max_diff = 0, max_ref = 0, long_vs_short = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(got[i] - ref_long[i]));
      max_ref = std::max(max_ref, std::fabs(ref_long[i]));
      long_vs_short = std::max(long_vs_short, static_cast<double>(std::fabs(got[i] - short_ctx[i])));
    }
    EXPECT_GT(max_ref, 0.1);
    EXPECT_LE(max_diff, 1e-4 * max_ref) << kernels::IsaName(isa);
    EXPECT_GT(long_vs_short, 100 * max_diff) << kernels::IsaName(isa);
  }
}

// deepseek2's latent cache as every engine makes it (KvCacheTypesFor): V is not stored but read
// from the first kv_lora_rank values of each K row, so the cache is K bytes only, and the logits
// are bit for bit those of a cache that keeps a copy of each row as V, for f32, f16 and q8_0 K/V;
// differing K and V types are refused by flag name, as llama.cpp refuses them.
TEST(Architectures, Deepseek2LatentCacheStoresNoValues) {
  testing::OpenedModel om = testing::OpenTestModel(
      testing::WriteSyntheticTestModel(testing::TempDir(), "deepseek2-tiny", DType::kF32));
  ASSERT_TRUE(om.src);
  auto m = CreateModel(*om.src);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  const auto toks = Prompt(kPromptLen);
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    auto layout = KvCacheTypesFor(c, KvCacheTypes{t, t});
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    EXPECT_EQ(layout->v_in_k, 64);
    auto latent = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim, *layout);
    auto copied = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim, KvCacheTypes{t, t});
    ASSERT_TRUE(latent.ok() && copied.ok());
    EXPECT_EQ(latent->ValueSlotBytes(), 0u);
    EXPECT_EQ(latent->Bytes() * 2, copied->Bytes());
    ForwardBatch b;
    for (size_t i = 0; i < toks.size(); ++i) b.Add(toks[i], static_cast<int32_t>(i), 0, true);
    std::vector<float> a(toks.size() * static_cast<size_t>(c.n_vocab)), want(a.size());
    ASSERT_TRUE((*m)->Forward(b, *latent, a.data(), nullptr).ok());
    ASSERT_TRUE((*m)->Forward(b, *copied, want.data(), nullptr).ok());
    EXPECT_EQ(0, std::memcmp(a.data(), want.data(), a.size() * sizeof(float))) << DTypeName(t);
  }
  auto mixed = KvCacheTypesFor(c, KvCacheTypes{DType::kQ8_0, DType::kF16});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("--cache-type-v"), std::string::npos) << mixed.status().ToString();
  const ModelConfig q3 =
      testing::OpenTestModel(testing::WriteSyntheticTestModel(testing::TempDir(), "qwen3-tiny", DType::kF32))
          .cfg;
  auto plain = KvCacheTypesFor(q3, KvCacheTypes{DType::kQ8_0, DType::kF16});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->v_in_k, 0);
}

// Sliding-window layers (and deepseek2's latent cache) on the paged cache: a prefill of 20 tokens
// then one token per step, with blocks of 8 in shuffled physical order, give the reference's
// logits at every position (the window crosses blocks and the decode path, not just one batched
// prefill).
TEST(Architectures, SlidingWindowPrefillThenDecodeOnPagedCache) {
  for (const char* preset : {"gemma2-tiny", "gemma3-tiny", "gpt-oss-tiny", "deepseek2-tiny"}) {
    testing::OpenedModel om =
        testing::OpenTestModel(testing::WriteSyntheticTestModel(testing::TempDir(), preset, DType::kF32));
    ASSERT_TRUE(om.src);
    auto m = CreateModel(*om.src, ExactGelu());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const ModelConfig& c = (*m)->config();
    const auto toks = Prompt(kPromptLen);
    const std::vector<double> ref = testing::ReferenceForward(*om.src).Run(toks);
    const int32_t bs = 8, n_blocks = kPromptLen / bs;
    auto kv = PagedKvCache::Create(c.n_layers, n_blocks + 2, bs, c.n_kv_heads, c.head_dim, 1, kPromptLen,
                                   KvCacheTypes::F32());
    ASSERT_TRUE(kv.ok());
    std::vector<int32_t> table;
    for (int32_t i = 0; i < n_blocks; ++i) table.push_back((i * 5 + 3) % (n_blocks + 2));
    kv->SetBlockTable(0, table);
    double max_diff = 0, max_ref = 0;
    for (int32_t begin = 0; begin < kPromptLen;) {
      const int32_t end = begin == 0 ? 20 : begin + 1;
      ForwardBatch b;
      for (int32_t i = begin; i < end; ++i) b.Add(toks[static_cast<size_t>(i)], i, 0, true);
      std::vector<float> out(static_cast<size_t>(end - begin) * c.n_vocab);
      Status st = (*m)->Forward(b, *kv, out.data(), nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (size_t j = 0; j < out.size(); ++j) {
        const double want = ref[static_cast<size_t>(begin) * c.n_vocab + j];
        max_diff = std::max(max_diff, std::fabs(out[j] - want));
        max_ref = std::max(max_ref, std::fabs(want));
      }
      begin = end;
    }
    EXPECT_GT(max_ref, 0.1) << preset;
    EXPECT_LE(max_diff, 1e-4 * max_ref) << preset;
  }
}

// Gemma's default GELU is llama.cpp's fp16 table: its logits differ from the exact GELU's (so
// the option reaches the FFN) by a few fp16 steps (2^-11 = 4.9e-4) of the logits' scale, as
// the table's rounding of every FFN activation explains (measured 1.4e-3 and 4.2e-4), far below
// what a wrong table entry or range rule would move them.
TEST(Architectures, GemmaRunsLlamaCppsFp16GeluByDefault) {
  for (const char* preset : {"gemma2-tiny", "gemma3-tiny"}) {
    testing::OpenedModel om =
        testing::OpenTestModel(testing::WriteSyntheticTestModel(testing::TempDir(), preset, DType::kF32));
    ASSERT_TRUE(om.src);
    auto table = CreateModel(*om.src);
    auto exact = CreateModel(*om.src, ExactGelu());
    ASSERT_TRUE(table.ok() && exact.ok());
    const auto toks = Prompt(kPromptLen);
    const std::vector<float> a = Logits(**table, toks), b = Logits(**exact, toks);
    double max_diff = 0;
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(double{a[i]} - b[i]));
    std::fprintf(stderr, "%s: fp16 GELU table vs exact: max |d logit| %.3g of max %.3g\n", preset, max_diff,
                 MaxAbs(b));
    EXPECT_GT(max_diff, 0.0) << preset;
    EXPECT_LT(max_diff, 3e-3 * MaxAbs(b)) << preset;
  }
}

// OLMo 3 GGUFs reuse arch olmo2 with sliding-window layers, which Ferry does not run yet.
TEST(Architectures, Olmo2WithSlidingWindowIsRefused) {
  ExpectRefusedWith("olmo2-tiny", "olmo2.attention.sliding_window", 4096);
}

TEST(Architectures, GraniteNeedsLogitScale) {
  ExpectRequiredKey("granite-tiny", "granite.logit_scale");
}

// --- Hugging Face folders of the same weights --------------------------------------------

// llama.cpp tensor name -> transformers' (the inverse of formats/hf_names.cc, written out).
std::string HfName(const std::string& g, bool gemma, bool phi3, bool gpt_oss) {
  if (phi3 && g.ends_with(".ffn_up.weight"))  // phi3's gate|up rows
    return "model.layers." + g.substr(4, g.find('.', 4) - 4) + ".mlp.gate_up_proj.weight";
  if (gemma &&
      g.ends_with(".ffn_norm.weight"))  // gemma's FFN pre norm (post_attention_layernorm is its post norm)
    return "model.layers." + g.substr(4, g.find('.', 4) - 4) + ".pre_feedforward_layernorm.weight";
  static const std::map<std::string, std::string> kGlobal = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},  // olmo2 (no ffn_norm there)
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"ffn_gate_inp.weight", "mlp.gate.weight"}};
  static const std::map<std::string, std::string> kGptOss = {
      {"attn_q.bias", "self_attn.q_proj.bias"}, {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"}, {"attn_output.bias", "self_attn.o_proj.bias"},
      {"attn_sinks.weight", "self_attn.sinks"}, {"ffn_gate_inp.weight", "mlp.router.weight"},
      {"ffn_gate_inp.bias", "mlp.router.bias"}};
  if (auto it = kGlobal.find(g); it != kGlobal.end()) return it->second;
  const size_t dot = g.find('.', 4);
  const std::string suffix = g.substr(dot + 1);
  if (auto it = kGptOss.find(suffix); gpt_oss && it != kGptOss.end())
    return "model.layers." + g.substr(4, dot - 4) + "." + it->second;
  return "model.layers." + g.substr(4, dot - 4) + "." + kLayer.at(suffix);
}

// llama.cpp's convert permutes llama-style q/k rows from rotate-half into interleaved pairs;
// row r of a head in HF order is row OriginalRow(r) in the GGUF.
int64_t GgufRow(int64_t hf_row, int64_t head_dim) {
  const int64_t h = hf_row / head_dim, r = hf_row % head_dim, half = head_dim / 2;
  return h * head_dim + (r % half) * 2 + r / half;
}

// transformers' GptOssExperts parameters of layer l from the GGUF's f32 experts: gate_up_proj
// [E, dim, 2F] (x @ W; gate in even columns, up in odd), gate_up_proj_bias [E, 2F], down_proj
// [E, F, dim], down_proj_bias [E, dim]. `store` keeps the data alive; it must not reallocate.
void WriteGptOssExperts(const formats::WeightSource& gguf, const ModelConfig& c,
                        std::vector<std::vector<float>>& store,
                        std::vector<formats::SafetensorsTensor>& out) {
  auto f32 = [&](const std::string& name) {
    const formats::TensorRef* t = gguf.FindTensor(name);
    EXPECT_TRUE(t && t->dtype == DType::kF32) << name;
    return static_cast<const float*>(t->data);
  };
  const int64_t E = c.n_expert, F = c.expert_ffn_dim, D = c.dim;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".",
                      h = "model.layers." + std::to_string(l) + ".mlp.experts.";
    const float *gate = f32(b + "ffn_gate_exps.weight"), *up = f32(b + "ffn_up_exps.weight"),
                *down = f32(b + "ffn_down_exps.weight"), *gate_b = f32(b + "ffn_gate_exps.bias"),
                *up_b = f32(b + "ffn_up_exps.bias");
    std::vector<float>& gu = store.emplace_back(static_cast<size_t>(E * D * 2 * F));  // [E, D, 2F]
    std::vector<float>& gub = store.emplace_back(static_cast<size_t>(E * 2 * F));     // [E, 2F]
    std::vector<float>& dn = store.emplace_back(static_cast<size_t>(E * F * D));      // [E, F, D]
    for (int64_t e = 0; e < E; ++e)
      for (int64_t j = 0; j < F; ++j) {
        gub[(e * F + j) * 2] = gate_b[e * F + j];
        gub[(e * F + j) * 2 + 1] = up_b[e * F + j];
        for (int64_t d = 0; d < D; ++d) {
          gu[(e * D + d) * 2 * F + 2 * j] = gate[(e * F + j) * D + d];
          gu[(e * D + d) * 2 * F + 2 * j + 1] = up[(e * F + j) * D + d];
          dn[(e * F + j) * D + d] = down[(e * D + d) * F + j];
        }
      }
    const formats::TensorRef* db = gguf.FindTensor(b + "ffn_down_exps.bias");
    ASSERT_TRUE(db);
    out.push_back({h + "gate_up_proj", DType::kF32, {E, D, 2 * F}, gu.data(), gu.size() * 4});
    out.push_back({h + "gate_up_proj_bias", DType::kF32, {E, 2 * F}, gub.data(), gub.size() * 4});
    out.push_back({h + "down_proj", DType::kF32, {E, F, D}, dn.data(), dn.size() * 4});
    out.push_back({h + "down_proj_bias", DType::kF32, {E, D}, db->data, db->nbytes});
  }
}

// An f32 expert tensor t ([E, rows, cols], blk.L.ffn_X_exps.weight) as transformers' one tensor
// per expert, `layer` + "mlp.experts.E.X_proj.weight" (layer: "model.layers.L."). `store` keeps
// the data alive; it must not reallocate.
void SplitExpertTensor(const formats::TensorRef& t, const std::string& layer,
                       std::vector<std::vector<float>>& store, std::vector<formats::SafetensorsTensor>& out) {
  const auto* f = static_cast<const float*>(t.data);
  const size_t at = t.name.find("ffn_") + 4;
  const std::string which = t.name.substr(at, t.name.find("_exps") - at);
  const int64_t per = t.shape[1] * t.shape[2];
  for (int64_t e = 0; e < t.shape[0]; ++e) {
    store.emplace_back(f + e * per, f + (e + 1) * per);
    out.push_back({layer + "mlp.experts." + std::to_string(e) + "." + which + "_proj.weight",
                   DType::kF32,
                   {t.shape[1], t.shape[2]},
                   store.back().data(),
                   store.back().size() * 4});
  }
}

// Writes dir/config.json + model.safetensors holding the GGUF's f32 weights under HF names.
void WriteHfFolder(const formats::WeightSource& gguf, const ModelConfig& c, const std::string& hf_arch,
                   const std::string& extra_config, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const bool permuted = !c.rope_neox;  // llama-style GGUFs hold q/k interleaved
  std::vector<std::vector<float>> store;
  store.reserve(gguf.tensors().size() * static_cast<size_t>(c.n_expert + 1) * 3);
  std::vector<formats::SafetensorsTensor> out;
  const bool gpt_oss = c.arch == "gpt-oss";
  if (gpt_oss) WriteGptOssExperts(gguf, c, store, out);
  for (const formats::TensorRef& t : gguf.tensors()) {
    ASSERT_EQ(t.dtype, DType::kF32) << t.name;
    if (t.name.rfind("rope_factors_", 0) == 0) continue;  // config.json's rope_scaling (Phi3Config)
    if (gpt_oss && t.name.find("_exps.") != std::string::npos) continue;  // WriteGptOssExperts
    const auto* f = static_cast<const float*>(t.data);
    if (t.name.ends_with("_exps.weight")) {  // [E, rows, cols] -> one tensor per expert
      SplitExpertTensor(t, "model.layers." + t.name.substr(4, t.name.find('.', 4) - 4) + ".", store, out);
      continue;
    }
    store.emplace_back(f, f + t.NumElements());
    std::vector<float>& w = store.back();
    if (c.gelu_ffn && t.name.ends_with("norm.weight"))  // gemma: HF stores w of its (1 + w)
      for (float& x : w) x -= 1.0f;
    if (permuted && (t.name.ends_with("attn_q.weight") || t.name.ends_with("attn_k.weight"))) {
      const int64_t cols = t.shape[1];
      for (int64_t r = 0; r < t.shape[0]; ++r)
        std::copy_n(f + GgufRow(r, c.head_dim) * cols, cols, w.begin() + r * cols);
    }
    out.push_back(
        {HfName(t.name, c.gelu_ffn, c.fused_gate_up, gpt_oss), DType::kF32, t.shape, w.data(), w.size() * 4});
  }
  ASSERT_TRUE(formats::WriteSafetensors(dir + "/model.safetensors", out).ok());
  std::ofstream(dir + "/config.json")
      << "{\"architectures\": [\"" << hf_arch << "\"], \"hidden_size\": " << c.dim
      << ", \"intermediate_size\": " << c.ffn_dim << ", \"num_hidden_layers\": " << c.n_layers
      << ", \"num_attention_heads\": " << c.n_heads << ", \"num_key_value_heads\": " << c.n_kv_heads
      << ", \"head_dim\": " << c.head_dim << ", \"vocab_size\": " << c.n_vocab << ", \"rms_norm_eps\": 1e-5"
      << ", \"rope_theta\": " << c.rope_theta
      << ", \"tie_word_embeddings\": " << (gguf.FindTensor("output.weight") ? "false" : "true")
      << extra_config << "}";
}

// Phi-3's config.json keys for the phi3-tiny GGUF: its partial rotary factor and contexts, and
// LongRoPE's factor lists copied from the GGUF's rope_factors_long/short tensors.
std::string Phi3Config(const formats::WeightSource& gguf, const ModelConfig& c) {
  auto list = [&](const char* name) {
    const formats::TensorRef* t = gguf.FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    std::string s = "[";
    for (int64_t i = 0; t && i < t->NumElements(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.9g", i ? ", " : "", static_cast<const float*>(t->data)[i]);
      s += buf;
    }
    return s + "]";
  };
  return ", \"partial_rotary_factor\": " + std::to_string(static_cast<double>(c.rot_dim) / c.head_dim) +
         ", \"max_position_embeddings\": " + std::to_string(c.n_ctx_train) +
         ", \"original_max_position_embeddings\": " + std::to_string(c.n_ctx_orig) +
         ", \"sliding_window\": 2047, \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": " +
         list("rope_factors_long.weight") + ", \"short_factor\": " + list("rope_factors_short.weight") + "}";
}

struct HfCase {
  const char* preset;
  const char* hf_arch;
  const char* extra;  // config.json keys beyond the shapes
};

// Same weights, same function: qwen3 (no permutation, same order everywhere) bit for bit;
// the llama-style ones up to the summation order their permuted q/k dot products change.
TEST(Architectures, HfFolderMatchesGguf) {
  const HfCase cases[] = {
      {"qwen3-tiny", "Qwen3ForCausalLM", ""},
      {"qwen3moe-tiny", "Qwen3MoeForCausalLM",
       R"(, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "norm_topk_prob": true)"},
      {"granite-tiny", "GraniteForCausalLM",
       R"(, "embedding_multiplier": 12.0, "attention_multiplier": 0.015625, "residual_multiplier": 0.22, "logits_scaling": 8.0)"},
      {"smollm3-tiny", "SmolLM3ForCausalLM", R"(, "no_rope_layers": [1, 1, 1, 0])"},
      {"olmo2-tiny", "Olmo2ForCausalLM", ""},
      {"gemma2-tiny", "Gemma2ForCausalLM",
       R"(, "query_pre_attn_scalar": 16, "sliding_window": 32, "attn_logit_softcapping": 0.05, "final_logit_softcapping": 0.5, "hidden_activation": "gelu_pytorch_tanh")"},
      {"gemma3-tiny", "Gemma3ForCausalLM",
       R"(, "query_pre_attn_scalar": 32, "sliding_window": 32, "rope_local_base_freq": 10000.0, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"])"},
      {"phi3-tiny", "Phi3ForCausalLM", nullptr},  // extra keys from the file: Phi3Config
      {"gpt-oss-tiny", "GptOssForCausalLM",
       R"(, "num_local_experts": 8, "num_experts_per_tok": 4, "sliding_window": 32, "swiglu_limit": 7.0, "attention_bias": true, "max_position_embeddings": 512, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"], "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 128, "truncate": false})"},
  };
  for (const HfCase& hc : cases) {
    const std::string dir = testing::TempDir();
    testing::OpenedModel g =
        testing::OpenTestModel(testing::WriteSyntheticTestModel(dir, hc.preset, DType::kF32));
    ASSERT_TRUE(g.src);
    WriteHfFolder(*g.src, g.cfg, hc.hf_arch, hc.extra ? hc.extra : Phi3Config(*g.src, g.cfg),
                  dir + "/hf-" + hc.preset);
    auto hf_src = formats::OpenWeightSource(dir + "/hf-" + hc.preset);
    ASSERT_TRUE(hf_src.ok()) << hf_src.status().ToString();
    auto hf = CreateModel(**hf_src);
    ASSERT_TRUE(hf.ok()) << hc.preset << ": " << hf.status().ToString();
    auto gg = CreateModel(*g.src);
    ASSERT_TRUE(gg.ok());
    EXPECT_EQ((*hf)->config().nope_layers, (*gg)->config().nope_layers) << hc.preset;
    EXPECT_EQ((*hf)->config().swa_layers, (*gg)->config().swa_layers) << hc.preset;
    EXPECT_EQ((*hf)->config().rot_dim, (*gg)->config().rot_dim) << hc.preset;
    EXPECT_EQ((*hf)->config().rope_attn_factor, (*gg)->config().rope_attn_factor) << hc.preset;
    if (g.src->FindTensor("rope_factors_long.weight")) {  // LongRoPE's switch point (phi3)
      EXPECT_EQ((*hf)->config().n_ctx_orig, (*gg)->config().n_ctx_orig) << hc.preset;
    }
    const auto toks = Prompt(kPromptLen);
    // A 128-position cache as well: phi3's long LongRoPE factors (its original context is 64).
    for (int32_t context : {64, 128}) {
      const std::vector<float> a = Logits(**hf, toks, context), b = Logits(**gg, toks, context);
      if (g.cfg.rope_neox) {
        EXPECT_EQ(a, b) << hc.preset << " context " << context;
      } else {
        double d = 0;
        for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
        EXPECT_LE(d, 1e-5 * MaxAbs(b)) << hc.preset;
        EXPECT_GT(MaxAbs(b), 0.1) << hc.preset;
      }
    }
  }
}

// DeepSeek-V2's Hugging Face folder of the deepseek2-tiny GGUF's f32 weights: transformers' names
// (modeling_deepseek.py), kv_b_proj rebuilt from the split attn_k_b (transposed back) and attn_v_b
// as llama.cpp's converter splits it, experts one tensor each, and the config.json keys.
void WriteDeepseekHfFolder(const formats::WeightSource& gguf, const ModelConfig& c, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::vector<float>> store;
  store.reserve(gguf.tensors().size() * static_cast<size_t>(c.n_expert + 1) * 3);
  std::vector<formats::SafetensorsTensor> out;
  static const std::map<std::string, std::string> kNames = {
      {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
      {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
      {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
      {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
      {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"ffn_gate_inp.weight", "mlp.gate.weight"},
      {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
      {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
      {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"}};
  const int64_t nh = c.n_heads, r = c.kv_lora_rank, nope = c.MlaNopeDim(), vd = c.mla_v_dim;
  for (const formats::TensorRef& t : gguf.tensors()) {
    ASSERT_EQ(t.dtype, DType::kF32) << t.name;
    const auto* f = static_cast<const float*>(t.data);
    if (t.name.rfind("blk.", 0) != 0) {
      store.emplace_back(f, f + t.NumElements());
      out.push_back({HfName(t.name, false, false, false), DType::kF32, t.shape, store.back().data(),
                     store.back().size() * 4});
      continue;
    }
    const size_t dot = t.name.find('.', 4);
    const std::string layer = "model.layers." + t.name.substr(4, dot - 4) + ".",
                      suffix = t.name.substr(dot + 1);
    if (suffix == "attn_v_b.weight") continue;  // with attn_k_b below
    if (suffix == "attn_k_b.weight") {          // kv_b_proj [heads (nope + v), kv_lora]
      const formats::TensorRef* vb = gguf.FindTensor(t.name.substr(0, dot + 1) + "attn_v_b.weight");
      ASSERT_TRUE(vb);
      const auto* v = static_cast<const float*>(vb->data);
      std::vector<float>& kv = store.emplace_back(static_cast<size_t>(nh * (nope + vd) * r));
      for (int64_t h = 0; h < nh; ++h) {
        for (int64_t i = 0; i < nope; ++i)
          for (int64_t a = 0; a < r; ++a) kv[(h * (nope + vd) + i) * r + a] = f[(h * r + a) * nope + i];
        std::copy_n(v + h * vd * r, vd * r, kv.begin() + (h * (nope + vd) + nope) * r);
      }
      out.push_back({layer + "self_attn.kv_b_proj.weight",
                     DType::kF32,
                     {nh * (nope + vd), r},
                     kv.data(),
                     kv.size() * 4});
      continue;
    }
    if (suffix.ends_with("_exps.weight")) {
      SplitExpertTensor(t, layer, store, out);
      continue;
    }
    store.emplace_back(f, f + t.NumElements());
    out.push_back(
        {layer + kNames.at(suffix), DType::kF32, t.shape, store.back().data(), store.back().size() * 4});
  }
  ASSERT_TRUE(formats::WriteSafetensors(dir + "/model.safetensors", out).ok());
  std::ofstream(dir + "/config.json")
      << "{\"architectures\": [\"DeepseekV2ForCausalLM\"], \"hidden_size\": " << c.dim
      << ", \"intermediate_size\": " << c.ffn_dim << ", \"moe_intermediate_size\": " << c.expert_ffn_dim
      << ", \"num_hidden_layers\": " << c.n_layers << ", \"num_attention_heads\": " << nh
      << ", \"num_key_value_heads\": " << nh << ", \"vocab_size\": " << c.n_vocab
      << ", \"rms_norm_eps\": 1e-5, \"rope_theta\": " << c.rope_theta
      << ", \"max_position_embeddings\": 512, \"tie_word_embeddings\": false"
      << ", \"kv_lora_rank\": " << r << ", \"q_lora_rank\": " << c.q_lora_rank
      << ", \"qk_nope_head_dim\": " << nope << ", \"qk_rope_head_dim\": " << c.rot_dim
      << ", \"v_head_dim\": " << vd << ", \"n_routed_experts\": " << c.n_expert
      << ", \"num_experts_per_tok\": " << c.n_expert_used << ", \"n_shared_experts\": 1"
      << ", \"first_k_dense_replace\": " << c.n_dense_layers
      << R"(, "routed_scaling_factor": 2.5, "norm_topk_prob": false, "topk_method": "greedy", "n_group": 1, )"
      << R"("topk_group": 1, "scoring_func": "softmax", "moe_layer_freq": 1, "attention_bias": false, )"
      << R"("rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128, )"
      << R"("beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}})";
}

// The same deepseek2 weights from a DeepSeek-V2 Hugging Face folder: the same config (MLA shapes,
// YaRN scales, routing) and bit for bit the same logits (kv_b_proj split back exactly; no
// permutation: DeepSeek rotates interleaved pairs as llama.cpp does). Grouped routing is refused.
TEST(Architectures, Deepseek2HfFolderMatchesGguf) {
  const std::string dir = testing::TempDir();
  testing::OpenedModel g =
      testing::OpenTestModel(testing::WriteSyntheticTestModel(dir, "deepseek2-tiny", DType::kF32));
  ASSERT_TRUE(g.src);
  WriteDeepseekHfFolder(*g.src, g.cfg, dir + "/hf-deepseek2");
  auto hf_src = formats::OpenWeightSource(dir + "/hf-deepseek2");
  ASSERT_TRUE(hf_src.ok()) << hf_src.status().ToString();
  EXPECT_EQ((*hf_src)->FindTensor("blk.1.attn_kv_b.weight"), nullptr);  // split, not kept
  auto hf = CreateModel(**hf_src);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  auto gg = CreateModel(*g.src);
  ASSERT_TRUE(gg.ok());
  const ModelConfig &a = (*hf)->config(), &b = (*gg)->config();
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.n_kv_heads, 1);
  EXPECT_EQ(a.rope_neox, b.rope_neox);
  EXPECT_EQ(a.n_dense_layers, b.n_dense_layers);
  EXPECT_EQ(a.shared_expert_ffn_dim, b.shared_expert_ffn_dim);
  EXPECT_EQ(a.expert_weights_norm, b.expert_weights_norm);
  EXPECT_FLOAT_EQ(a.expert_weights_scale, b.expert_weights_scale);
  EXPECT_FLOAT_EQ(a.AttentionScale(), b.AttentionScale());
  EXPECT_FLOAT_EQ(a.rope_attn_factor, b.rope_attn_factor);
  const auto toks = Prompt(kPromptLen);
  const std::vector<float> la = Logits(**hf, toks), lb = Logits(**gg, toks);
  EXPECT_GT(MaxAbs(lb), 0.1);
  double d = 0;
  for (size_t i = 0; i < la.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(la[i] - lb[i])));
  EXPECT_LE(d, 1e-6 * MaxAbs(lb));

  std::string cfg;
  std::getline(std::ifstream(dir + "/hf-deepseek2/config.json"), cfg, '\0');
  const std::string grouped = std::regex_replace(cfg, std::regex(R"("n_group": 1, "topk_group": 1)"),
                                                 R"("n_group": 4, "topk_group": 2)");
  std::ofstream(dir + "/hf-deepseek2/config.json") << std::regex_replace(
      grouped, std::regex(R"("topk_method": "greedy")"), R"("topk_method": "group_limited_greedy")");
  auto refused = formats::OpenWeightSource(dir + "/hf-deepseek2");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("topk_method"), std::string::npos) << refused.status().ToString();
}

// openai's MXFP4 checkpoint layout of one expert matrix: blocks [E, rows, nb, 16] (elements 2i and
// 2i + 1 in byte i's low and high nibble) and scales [E, rows, nb], from ggml's 17-byte blocks
// (scale, then element j low and j + 16 high in byte j). `rows_of`: the checkpoint row r's GGUF
// tensor and row (gate_up: even rows gate, odd rows up).
struct Mxfp4Hf {
  std::vector<uint8_t> blocks, scales;
};
Mxfp4Hf ToHfMxfp4(const std::vector<const formats::TensorRef*>& parts, int64_t E, int64_t rows_each) {
  const int64_t cols = parts[0]->shape[2], nb = cols / 32;
  const int64_t R = rows_each * static_cast<int64_t>(parts.size());
  Mxfp4Hf h;
  h.blocks.resize(static_cast<size_t>(E * R * nb * 16));
  h.scales.resize(static_cast<size_t>(E * R * nb));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < R; ++r) {
      const formats::TensorRef* t = parts[static_cast<size_t>(r) % parts.size()];
      const int64_t src_row = r / static_cast<int64_t>(parts.size());
      for (int64_t b = 0; b < nb; ++b) {
        const auto* in = static_cast<const uint8_t*>(t->data) + ((e * rows_each + src_row) * nb + b) * 17;
        const size_t o = static_cast<size_t>((e * R + r) * nb + b);
        h.scales[o] = in[0];
        auto elem = [&](int k) { return k < 16 ? in[1 + k] & 0x0F : in[1 + k - 16] >> 4; };
        for (int i = 0; i < 16; ++i)
          h.blocks[o * 16 + static_cast<size_t>(i)] =
              static_cast<uint8_t>(elem(2 * i) | elem(2 * i + 1) << 4);
      }
    }
  return h;
}

// An MXFP4 gpt-oss checkpoint (experts as *_blocks / *_scales, quant_method mxfp4) loads into the
// very bytes llama.cpp's converter writes: the GGUF's MXFP4 expert tensors, byte for byte.
TEST(Architectures, GptOssHfMxfp4ExpertsEqualGgufBytes) {
  const std::string dir = testing::TempDir();
  testing::OpenedModel g =
      testing::OpenTestModel(testing::WriteSyntheticTestModel(dir, "gpt-oss-tiny", DType::kMXFP4));
  ASSERT_TRUE(g.src);
  const ModelConfig& c = g.cfg;
  const int64_t E = c.n_expert, F = c.expert_ffn_dim, D = c.dim;
  std::vector<Mxfp4Hf> keep;
  keep.reserve(static_cast<size_t>(2 * c.n_layers));
  std::vector<formats::SafetensorsTensor> out;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".",
                      h = "model.layers." + std::to_string(l) + ".mlp.experts.";
    const formats::TensorRef *gate = g.src->FindTensor(b + "ffn_gate_exps.weight"),
                             *up = g.src->FindTensor(b + "ffn_up_exps.weight"),
                             *down = g.src->FindTensor(b + "ffn_down_exps.weight");
    ASSERT_TRUE(gate && up && down);
    ASSERT_EQ(gate->dtype, DType::kMXFP4);
    const Mxfp4Hf& gu = keep.emplace_back(ToHfMxfp4({gate, up}, E, F));
    const Mxfp4Hf& dn = keep.emplace_back(ToHfMxfp4({down}, E, D));
    out.push_back(
        {h + "gate_up_proj_blocks", DType::kU8, {E, 2 * F, D / 32, 16}, gu.blocks.data(), gu.blocks.size()});
    out.push_back(
        {h + "gate_up_proj_scales", DType::kU8, {E, 2 * F, D / 32}, gu.scales.data(), gu.scales.size()});
    out.push_back(
        {h + "down_proj_blocks", DType::kU8, {E, D, F / 32, 16}, dn.blocks.data(), dn.blocks.size()});
    out.push_back({h + "down_proj_scales", DType::kU8, {E, D, F / 32}, dn.scales.data(), dn.scales.size()});
  }
  const std::string hf = dir + "/hf-gpt-oss-mxfp4";
  std::filesystem::create_directories(hf);
  ASSERT_TRUE(formats::WriteSafetensors(hf + "/model.safetensors", out).ok());
  const std::string config =
      R"({"architectures": ["GptOssForCausalLM"], "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512,
          "num_local_experts": 8, "num_experts_per_tok": 4, "sliding_window": 32,
          "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}})";
  std::ofstream(hf + "/config.json") << config;
  auto src = formats::OpenWeightSource(hf);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  int compared = 0;
  for (const formats::TensorRef& t : (*src)->tensors()) {
    const formats::TensorRef* want = g.src->FindTensor(t.name);
    ASSERT_TRUE(want) << t.name;
    EXPECT_EQ(t.dtype, DType::kMXFP4) << t.name;
    EXPECT_EQ(t.shape, want->shape) << t.name;
    ASSERT_EQ(t.nbytes, want->nbytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, want->data, t.nbytes), 0) << t.name;
    ++compared;
  }
  EXPECT_EQ(compared, 3 * c.n_layers);

  // A checkpoint with blocks but no scales, or rows that cannot be gate/up pairs, is refused by name.
  out.erase(out.begin() + 1);
  ASSERT_TRUE(formats::WriteSafetensors(hf + "/model.safetensors", out).ok());
  auto bad = formats::OpenWeightSource(hf);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gate_up_proj_scales"), std::string::npos) << bad.status().ToString();
}

// config.json values the forward pass cannot honour are refused, naming the key.
TEST(Architectures, GptOssHfConfigRefusesWhatItCannotRun) {
  const std::string dir = testing::TempDir() + "/hf-gpt-oss-bad";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(formats::WriteSafetensors(dir + "/model.safetensors", {}).ok());
  const std::string base =
      R"({"architectures": ["GptOssForCausalLM"], "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512)";
  const std::pair<const char*, const char*> cases[] = {
      {R"(, "num_experts_per_tok": 4, "sliding_window": 32)", "num_local_experts"},
      {R"(, "num_local_experts": 8, "num_experts_per_tok": 4)", "sliding_window"},
      {R"(, "num_local_experts": 2, "num_experts_per_tok": 4, "sliding_window": 32)", "num_experts_per_tok"},
      {R"(, "num_local_experts": 8, "num_experts_per_tok": 4, "sliding_window": 32, "swiglu_limit": 10.0)",
       "swiglu_limit"},
      {R"(, "num_local_experts": 8, "num_experts_per_tok": 4, "sliding_window": 32, "layer_types": ["full_attention"])",
       "layer_types"},
      {R"(, "num_local_experts": 8, "num_experts_per_tok": 4, "sliding_window": 32, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 16.0})",
       "beta_fast"},
  };
  for (const auto& [extra, key] : cases) {
    std::ofstream(dir + "/config.json") << base << extra << "}";
    auto src = formats::OpenWeightSource(dir);
    ASSERT_FALSE(src.ok()) << key;
    EXPECT_NE(src.status().message().find(key), std::string::npos) << src.status().ToString();
  }
}

}  // namespace
}  // namespace ferry
