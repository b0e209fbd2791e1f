#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/hf_names.h"
#include "formats/safetensors.h"
#include "formats/weight_source.h"
#include "test_util.h"

namespace ferry::formats {
namespace {

using ::ferry::testing::AssetPath;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(HfNames, Mapping) {
  EXPECT_EQ(HfToGgufTensorName("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.12.self_attn.q_proj.weight"), "blk.12.attn_q.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_EQ(HfToGgufTensorName("model.layers.3.self_attn.o_proj.weight"), "blk.3.attn_output.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.3.mlp.gate_proj.weight"), "blk.3.ffn_gate.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.3.mlp.up_proj.weight"), "blk.3.ffn_up.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.7.input_layernorm.weight"), "blk.7.attn_norm.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.7.post_attention_layernorm.weight"), "blk.7.ffn_norm.weight");
  EXPECT_EQ(HfToGgufTensorName("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(HfToGgufTensorName("lm_head.weight"), "output.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.x.mlp.up_proj.weight"), "model.layers.x.mlp.up_proj.weight");
  EXPECT_EQ(HfToGgufTensorName("model.layers.1.self_attn.rotary_emb.inv_freq"),
            "model.layers.1.self_attn.rotary_emb.inv_freq");
}

// HF q/k rows are permuted per head into rotate-half order; row r_hf holds original row r.
int64_t OriginalRow(int64_t hf_row, int64_t rows_per_head) {
  const int64_t h = hf_row / rows_per_head, r = hf_row % rows_per_head, half = rows_per_head / 2;
  const int64_t j = r / half, i = r % half;  // hf (h, j, i) <- original (h, i, j)
  return h * rows_per_head + i * 2 + j;
}

TEST(HfFolder, Stories260KMatchesGguf) {
  FERRY_REQUIRE_ASSET("hf/stories260K/model.safetensors");
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto hf = OpenHuggingFaceFolder(AssetPath("hf/stories260K"));
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  auto gguf = OpenGguf(AssetPath("stories260K.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  const Metadata& m = (*hf)->metadata();
  const Metadata& g = (*gguf)->metadata();
  for (const char* key :
       {"general.architecture", "llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.dimension_count"}) {
    ASSERT_TRUE(m.Has(key)) << key;
    EXPECT_EQ(m.Find(key)->ToString(), g.Find(key)->ToString()) << key;
  }
  EXPECT_EQ(m.GetInt("llama.context_length"), 512);
  EXPECT_EQ(m.GetInt("llama.vocab_size"), 512);
  EXPECT_EQ(m.GetBool("ferry.rope.neox"), true);
  EXPECT_EQ(m.GetString("ferry.source.format"), "safetensors");
  EXPECT_EQ(m.GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(m.GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(*m.GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(m.GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ((*hf)->FindTensor("output.weight"), nullptr);  // tied

  ASSERT_EQ((*hf)->tensors().size(), 47u);
  for (const TensorRef& t : (*hf)->tensors()) {
    const TensorRef* ref = (*gguf)->FindTensor(t.name);
    ASSERT_NE(ref, nullptr) << t.name;
    ASSERT_EQ(t.shape, ref->shape) << t.name;
    ASSERT_EQ(t.dtype, DType::kF32);
    const bool is_q = t.name.find("attn_q.weight") != std::string::npos;
    const bool is_k = t.name.find("attn_k.weight") != std::string::npos;
    if (!is_q && !is_k) {
      EXPECT_EQ(std::memcmp(t.data, ref->data, t.nbytes), 0) << t.name;
      continue;
    }
    const int64_t heads = is_q ? 8 : 4, rows = t.shape[0], cols = t.shape[1];
    const auto* a = static_cast<const float*>(t.data);
    const auto* b = static_cast<const float*>(ref->data);
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(std::memcmp(a + r * cols, b + OriginalRow(r, rows / heads) * cols, cols * 4), 0)
          << t.name << " row " << r;
  }
}

// A tiny Qwen2-style folder written by the test, sharded in two files.
class HfSynthetic : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::ferry::testing::TempDir();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    for (size_t k = 0; k < w_.size(); ++k) w_[k] = static_cast<float>(k);
  }
  void WriteShards(bool with_index = true) {
    std::vector<SafetensorsTensor> a = {
        {"model.embed_tokens.weight", DType::kF32, {4, 8}, w_.data(), 128},
        {"model.layers.0.self_attn.q_proj.bias", DType::kF32, {8}, w_.data(), 32}};
    std::vector<SafetensorsTensor> b = {{"lm_head.weight", DType::kF32, {4, 8}, w_.data() + 8, 128},
                                        {"model.layers.0.custom.scale", DType::kF32, {2}, w_.data(), 8}};
    ASSERT_TRUE(WriteSafetensors(dir_ + "/model-00001-of-00002.safetensors", a).ok());
    ASSERT_TRUE(WriteSafetensors(dir_ + "/model-00002-of-00002.safetensors", b).ok());
    if (with_index)
      WriteText(dir_ + "/model.safetensors.index.json", R"({"metadata": {}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.self_attn.q_proj.bias": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.layers.0.custom.scale": "model-00002-of-00002.safetensors"}})");
  }
  std::string Config(const std::string& extra) {
    return R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
      "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 4,
      "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
      "eos_token_id": [7, 8], "tie_word_embeddings": false)" +
           extra + "}";
  }
  std::string dir_;
  std::vector<float> w_ = std::vector<float>(64);
};

TEST_F(HfSynthetic, ShardedQwen2) {
  WriteShards();
  WriteText(dir_ + "/config.json", Config(R"(, "rope_scaling": {"type": "linear", "factor": 2.0})"));
  auto src = OpenWeightSource(dir_);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const Metadata& m = (*src)->metadata();
  EXPECT_EQ(m.GetString("general.architecture"), "qwen2");
  EXPECT_EQ(m.GetInt("qwen2.attention.head_count_kv"), 1);
  EXPECT_EQ(m.GetInt("qwen2.rope.dimension_count"), 4);
  EXPECT_EQ(m.GetFloat("qwen2.rope.freq_base"), 1000000.0);
  EXPECT_EQ(m.GetString("qwen2.rope.scaling.type"), "linear");
  EXPECT_EQ(m.GetFloat("qwen2.rope.scaling.factor"), 2.0);
  EXPECT_EQ(m.GetInt("tokenizer.ggml.eos_token_id"), 7);
  EXPECT_FALSE(m.Has("tokenizer.ggml.bos_token_id"));
  EXPECT_EQ((*src)->tensors().size(), 4u);
  const TensorRef* out = (*src)->FindTensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(static_cast<const float*>(out->data)[0], 8.0f);
  EXPECT_NE((*src)->FindTensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_NE((*src)->FindTensor("model.layers.0.custom.scale"), nullptr);  // unknown names kept
  EXPECT_EQ((*src)->FindTensor("rope_freqs.weight"), nullptr);
}

TEST_F(HfSynthetic, IndexNamesMissingTensor) {
  WriteShards(false);
  WriteText(dir_ + "/model.safetensors.index.json", R"({"weight_map": {
      "model.embed_tokens.weight": "model-00002-of-00002.safetensors"}})");
  WriteText(dir_ + "/config.json", Config(""));
  auto src = OpenHuggingFaceFolder(dir_);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("model.embed_tokens.weight"), std::string::npos)
      << src.status().message();
}

TEST_F(HfSynthetic, Errors) {
  EXPECT_EQ(OpenHuggingFaceFolder(dir_).status().code(), StatusCode::kNotFound);  // no config.json
  WriteText(dir_ + "/config.json", Config(""));
  EXPECT_EQ(OpenHuggingFaceFolder(dir_).status().code(), StatusCode::kNotFound);  // no weights
  WriteShards();
  WriteText(dir_ + "/config.json", "{ not json");
  EXPECT_FALSE(OpenHuggingFaceFolder(dir_).ok());
  WriteText(dir_ + "/config.json", R"({"architectures": ["GPT2LMHeadModel"]})");
  auto r = OpenHuggingFaceFolder(dir_);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("GPT2LMHeadModel"), std::string::npos);
  WriteText(dir_ + "/config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "big"})");
  EXPECT_FALSE(OpenHuggingFaceFolder(dir_).ok());
  WriteText(dir_ + "/config.json", Config(R"(, "rope_scaling": {"rope_type": "longrope", "factor": 2.0})"));
  EXPECT_EQ(OpenHuggingFaceFolder(dir_).status().code(), StatusCode::kUnsupported);
}

TEST_F(HfSynthetic, Llama3RopeFreqs) {
  WriteShards();
  WriteText(dir_ + "/config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8,
      "vocab_size": 4, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  auto src = OpenHuggingFaceFolder(dir_);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const TensorRef* f = (*src)->FindTensor("rope_freqs.weight");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ShapeString(), "[64]");
  const auto* v = static_cast<const float*>(f->data);
  EXPECT_EQ(v[0], 1.0f);   // high frequencies untouched
  EXPECT_EQ(v[63], 8.0f);  // low frequencies divided by the factor
  int blended = 0;
  for (int k = 1; k < 64; ++k) {
    EXPECT_GE(v[k], v[k - 1]);
    blended += v[k] > 1.0f && v[k] < 8.0f;
  }
  EXPECT_GT(blended, 0);
  // Every factor against Meta's apply_scaling restated here in double precision: wavelengths
  // under 8192/4 keep their frequency, over 8192/1 are divided by 8, and between the two the
  // new frequency blends (1 - s) * f / 8 + s * f with s = (8192 / wavelen - 1) / (4 - 1);
  // the stored factor is f / new f.
  const double kPi = 3.14159265358979323846;
  for (int k = 0; k < 64; ++k) {
    const double f = 1.0 / std::pow(500000.0, 2.0 * k / 128.0), wavelen = 2 * kPi / f;
    double nf = f;
    if (wavelen > 8192.0) {
      nf = f / 8.0;
    } else if (wavelen >= 8192.0 / 4.0) {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      nf = (1 - smooth) * f / 8.0 + smooth * f;
    }
    EXPECT_NEAR(v[k], f / nf, 1e-5 * (f / nf)) << "dimension pair " << k;
  }
}

}  // namespace
}  // namespace ferry::formats
