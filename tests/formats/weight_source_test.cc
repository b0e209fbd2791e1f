#include "formats/weight_source.h"

#include <gtest/gtest.h>

#include <string>

#include "gguf_bytes.h"
#include "test_util.h"

namespace ferry::formats {
namespace {

using ::ferry::testing::AssetPath;

TEST(WeightSource, TensorRefHelpers) {
  TensorRef t;
  t.shape = {2048, 32000};
  EXPECT_EQ(t.ShapeString(), "[2048, 32000]");
  EXPECT_EQ(t.NumElements(), 2048 * 32000);
  t.shape = {};
  EXPECT_EQ(t.ShapeString(), "[]");
  EXPECT_EQ(t.NumElements(), 1);
}

TEST(WeightSource, DetectsEveryFormat) {
  struct Case {
    const char* rel;
    const char* format;
  };
  for (const Case& c : {Case{"stories260K.gguf", "gguf v3"}, Case{"stories260K.bin", "llama2c-legacy"},
                        Case{"stories260K_v1.bin", "llama2c-v1"}, Case{"stories260K_q80.bin", "llama2c-v2"},
                        Case{"hf/stories260K", "safetensors"}}) {
    FERRY_REQUIRE_ASSET(c.rel);  // skips the whole test, with a message, rather than one case silently
    auto src = OpenWeightSource(AssetPath(c.rel));
    ASSERT_TRUE(src.ok()) << c.rel << ": " << src.status().ToString();
    EXPECT_EQ((*src)->metadata().GetString("ferry.source.format"), c.format) << c.rel;
    EXPECT_EQ((*src)->path(), AssetPath(c.rel));
    EXPECT_GT((*src)->TensorBytes(), 0u);
    EXPECT_NE((*src)->FindTensor("token_embd.weight"), nullptr) << c.rel;
  }
}

TEST(WeightSource, Errors) {
  EXPECT_EQ(OpenWeightSource("/nonexistent/model.gguf").status().code(), StatusCode::kNotFound);
  const std::string dir = ::ferry::testing::TempDir();
  ::ferry::testing::GgufBytes junk;
  junk.Raw("not a model", 11);
  ::ferry::testing::WriteFileBytes(dir + "/junk.bin", junk.bytes);
  auto r = OpenWeightSource(dir + "/junk.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("junk.bin"), std::string::npos) << r.status().message();
  ::ferry::testing::GgufBytes gguf_magic;
  gguf_magic.Raw("GGUF", 4).Put<uint32_t>(3);
  ::ferry::testing::WriteFileBytes(dir + "/trunc.gguf", gguf_magic.bytes);
  r = OpenWeightSource(dir + "/trunc.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruptFile);
  ::ferry::testing::GgufBytes zip;
  zip.Raw("PK\x03\x04", 4).Zeros(100);
  ::ferry::testing::WriteFileBytes(dir + "/pytorch_model.bin", zip.bytes);
  EXPECT_EQ(OpenWeightSource(dir + "/pytorch_model.bin").status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace ferry::formats
