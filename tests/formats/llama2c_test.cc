#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "gguf_bytes.h"
#include "test_util.h"

namespace ferry::formats {
namespace {

using ::ferry::testing::AssetPath;

std::unique_ptr<WeightSource> Open(const std::string& rel) {
  auto src = OpenLlama2c(AssetPath(rel));
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  return src.ok() ? std::move(src).value() : nullptr;
}

void ExpectStoriesMetadata(const WeightSource& s) {
  const Metadata& m = s.metadata();
  EXPECT_EQ(m.GetString("general.architecture"), "llama");
  EXPECT_EQ(m.GetInt("llama.context_length"), 512);
  EXPECT_EQ(m.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(m.GetInt("llama.block_count"), 5);
  EXPECT_EQ(m.GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(m.GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(m.GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(m.GetInt("llama.rope.dimension_count"), 8);
  EXPECT_EQ(m.GetInt("llama.vocab_size"), 512);
  EXPECT_FLOAT_EQ(static_cast<float>(*m.GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(m.GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_FALSE(m.Has("ferry.rope.neox"));
  EXPECT_EQ(s.FindTensor("output.weight"), nullptr);  // shared classifier
  EXPECT_EQ(s.tensors().size(), 47u);                 // the GGUF's 48 minus its output copy
}

// Every tensor equals the GGUF's (bit for bit when tol == 0).
void ExpectMatchesGguf(const WeightSource& s, bool quantized) {
  auto gguf = OpenGguf(AssetPath("stories260K.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  for (const TensorRef& t : s.tensors()) {
    const TensorRef* g = (*gguf)->FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(t.shape, g->shape) << t.name;
    ASSERT_EQ(t.nbytes, g->nbytes) << t.name;
    if (!quantized || t.shape.size() == 1) {
      EXPECT_EQ(std::memcmp(t.data, g->data, t.nbytes), 0) << t.name;
      continue;
    }
    const auto* a = static_cast<const float*>(t.data);
    const auto* b = static_cast<const float*>(g->data);
    const size_t n = t.nbytes / 4;
    // Q8 groups of 32 over the flat tensor: |q*scale - w| <= scale/2 with scale = max|w|/127.
    for (size_t k = 0; k < n; k += 32) {
      float max_abs = 0;
      for (size_t i = k; i < k + 32; ++i) max_abs = std::max(max_abs, std::fabs(b[i]));
      const float tol = max_abs / 127.0f * 0.5f * 1.001f + 1e-9f;
      for (size_t i = k; i < k + 32; ++i) ASSERT_LE(std::fabs(a[i] - b[i]), tol) << t.name << "[" << i << "]";
    }
  }
}

TEST(Llama2c, Legacy) {
  FERRY_REQUIRE_ASSET("stories260K.bin");
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto s = Open("stories260K.bin");
  ASSERT_NE(s, nullptr);
  ExpectStoriesMetadata(*s);
  EXPECT_EQ(s->metadata().GetString("ferry.source.format"), "llama2c-legacy");
  EXPECT_EQ(s->FindTensor("blk.2.ffn_down.weight")->ShapeString(), "[64, 172]");
  ExpectMatchesGguf(*s, false);
}

TEST(Llama2c, Version1) {
  FERRY_REQUIRE_ASSET("stories260K_v1.bin");
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto s = Open("stories260K_v1.bin");
  ASSERT_NE(s, nullptr);
  ExpectStoriesMetadata(*s);
  EXPECT_EQ(s->metadata().GetString("ferry.source.format"), "llama2c-v1");
  ExpectMatchesGguf(*s, false);
}

TEST(Llama2c, Version2Q80) {
  FERRY_REQUIRE_ASSET("stories260K_q80.bin");
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto s = Open("stories260K_q80.bin");
  ASSERT_NE(s, nullptr);
  ExpectStoriesMetadata(*s);
  EXPECT_EQ(s->metadata().GetString("ferry.source.format"), "llama2c-v2");
  EXPECT_EQ(s->FindTensor("blk.0.ffn_down.weight")->dtype, DType::kF32);
  ExpectMatchesGguf(*s, true);
}

TEST(Llama2c, UnsharedClassifierLegacy) {
  // dim 8, hidden 16, 1 layer, 2 heads, 2 kv heads, vocab -4 (separate classifier), seq_len 2.
  ::ferry::testing::GgufBytes b;
  for (int32_t v : {8, 16, 1, 2, 2, -4, 2}) b.Put<int32_t>(v);
  const size_t floats = 4 * 8 + 8 + 64 * 2 + 64 * 2 + 8 + 16 * 8 * 3 + 8 + 2 * 2 * 2 + 4 * 8;
  for (size_t k = 0; k < floats; ++k) b.Put<float>(static_cast<float>(k));
  const std::string path = ::ferry::testing::TempDir() + "/tiny.bin";
  ::ferry::testing::WriteFileBytes(path, b.bytes);
  auto s = OpenLlama2c(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const TensorRef* out = (*s)->FindTensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->ShapeString(), "[4, 8]");
  EXPECT_EQ(static_cast<const float*>(out->data)[0], static_cast<float>(floats - 32));
  EXPECT_EQ((*s)->metadata().GetInt("llama.vocab_size"), 4);
  EXPECT_EQ((*s)->metadata().GetInt("llama.attention.head_count_kv"), 2);

  // One byte short or long: a clear size error.
  std::vector<uint8_t> shorter(b.bytes.begin(), b.bytes.end() - 1);
  ::ferry::testing::WriteFileBytes(path, shorter);
  auto bad = OpenLlama2c(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not match"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("expected"), std::string::npos);
}

TEST(Llama2c, BrokenHeaders) {
  const std::string dir = ::ferry::testing::TempDir();
  ::ferry::testing::GgufBytes v3;
  v3.Put<uint32_t>(0x616b3432).Put<int32_t>(3).Zeros(248);
  ::ferry::testing::WriteFileBytes(dir + "/v3.bin", v3.bytes);
  auto r = OpenLlama2c(dir + "/v3.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);

  ::ferry::testing::GgufBytes short_magic;
  short_magic.Put<uint32_t>(0x616b3432).Put<int32_t>(1);
  ::ferry::testing::WriteFileBytes(dir + "/short.bin", short_magic.bytes);
  EXPECT_FALSE(OpenLlama2c(dir + "/short.bin").ok());

  ::ferry::testing::GgufBytes zeros;
  zeros.Put<uint32_t>(0x616b3432).Put<int32_t>(2).Zeros(248);
  ::ferry::testing::WriteFileBytes(dir + "/zeros.bin", zeros.bytes);
  r = OpenLlama2c(dir + "/zeros.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();

  ::ferry::testing::GgufBytes text;
  const char* s = "hello, this is not a model file at all, just some text";
  text.Raw(s, std::strlen(s));
  ::ferry::testing::WriteFileBytes(dir + "/text.bin", text.bytes);
  r = OpenLlama2c(dir + "/text.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruptFile);

  ::ferry::testing::GgufBytes huge;  // plausible-looking but enormous: size mismatch, no allocation
  for (int32_t v : {1 << 20, 1 << 20, 4096, 1, 1, 1 << 24, 1 << 24}) huge.Put<int32_t>(v);
  ::ferry::testing::WriteFileBytes(dir + "/huge.bin", huge.bytes);
  r = OpenLlama2c(dir + "/huge.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace ferry::formats
