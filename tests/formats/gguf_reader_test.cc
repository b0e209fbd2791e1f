#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "gguf_bytes.h"
#include "test_util.h"

namespace ferry::formats {
namespace {

using ::ferry::testing::GgufBytes;

// Parses from an exact-size heap copy so a sanitizer build catches any read past the end.
Status ParseBytes(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  auto src = ParseGguf(copy.get(), bytes.size(), "test.gguf");
  return src.status();
}

void ExpectError(const std::vector<uint8_t>& bytes, StatusCode code, const std::string& needle) {
  Status st = ParseBytes(bytes);
  ASSERT_FALSE(st.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("test.gguf"), std::string::npos) << st.message();
}

// A small valid file: 2 KV, 2 f32 tensors of 32 bytes each (so the file ends with tensor data).
GgufBytes SmallValid() {
  GgufBytes b;
  b.Header(3, 2, 2).KvString("general.architecture", "llama").KvU32("llama.block_count", 1);
  b.Tensor("a", {8}, 0, 0).Tensor("b", {4, 2}, 0, 32).Align();
  for (int k = 0; k < 16; ++k) b.Put<float>(static_cast<float>(k));
  return b;
}

TEST(GgufReader, SmallValidParses) {
  GgufBytes b = SmallValid();
  std::vector<uint8_t> bytes = b.bytes;
  auto src = ParseGguf(bytes.data(), bytes.size(), "small.gguf");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->metadata().GetString("general.architecture"), "llama");
  EXPECT_EQ((*src)->metadata().GetString("ferry.source.format"), "gguf v3");
  const TensorRef* t = (*src)->FindTensor("b");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 4}));  // ne reversed
  EXPECT_EQ(static_cast<const float*>(t->data)[0], 8.0f);
}

TEST(GgufReader, Version2Parses) {
  GgufBytes b;
  b.Header(2, 0, 1).KvU32("x", 1);
  auto src = ParseGguf(b.bytes.data(), b.bytes.size(), "v2.gguf");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->metadata().GetString("ferry.source.format"), "gguf v2");
}

TEST(GgufReader, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = SmallValid().bytes;
  ASSERT_TRUE(ParseBytes(full).ok());
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_FALSE(ParseBytes(prefix).ok()) << "prefix of " << len << " bytes parsed";
  }
}

TEST(GgufReader, EveryTruncationOfRealFileIsAnError) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  const std::vector<uint8_t> full =
      ::ferry::testing::ReadFileBytes(::ferry::testing::AssetPath("stories260K.gguf"));
  ASSERT_TRUE(ParseBytes(full).ok());
  // Every prefix through the header and metadata, then a stride through the data.
  for (size_t len = 0; len < full.size(); len += (len < 1024 ? 1 : len < 20000 ? 37 : 4999)) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    ASSERT_FALSE(ParseBytes(prefix).ok()) << "prefix of " << len << " bytes parsed";
  }
}

TEST(GgufReader, WrongMagic) {
  std::vector<uint8_t> bytes = SmallValid().bytes;
  bytes[0] = 'X';
  ExpectError(bytes, StatusCode::kCorruptFile, "not a GGUF file");
  ExpectError({'G', 'G'}, StatusCode::kCorruptFile, "not a GGUF file");
}

TEST(GgufReader, UnsupportedVersions) {
  GgufBytes v1;
  v1.Header(1, 0, 0);
  ExpectError(v1.bytes, StatusCode::kUnsupported, "version 1");
  GgufBytes v4;
  v4.Header(4, 0, 0);
  ExpectError(v4.bytes, StatusCode::kUnsupported, "version 4");
}

TEST(GgufReader, HugeCounts) {
  GgufBytes t;
  t.Header(3, 1ull << 62, 0);
  ExpectError(t.bytes, StatusCode::kCorruptFile, "tensor_count");
  GgufBytes kv;
  kv.Header(3, 0, ~0ull);
  ExpectError(kv.bytes, StatusCode::kCorruptFile, "metadata_kv_count");
  GgufBytes arr;
  arr.Header(3, 0, 1).Str("big").Put<uint32_t>(9).Put<uint32_t>(10).Put<uint64_t>(1ull << 61);
  ExpectError(arr.bytes, StatusCode::kCorruptFile, "cannot fit");
  GgufBytes arr2;  // array of strings: each needs at least 8 bytes
  arr2.Header(3, 0, 1).Str("strs").Put<uint32_t>(9).Put<uint32_t>(8).Put<uint64_t>(4).Zeros(24);
  ExpectError(arr2.bytes, StatusCode::kCorruptFile, "cannot fit");
}

TEST(GgufReader, HugeStringLength) {
  GgufBytes key;
  key.Header(3, 0, 1).Put<uint64_t>(~0ull - 3).Raw("abc", 3).Zeros(8);
  ExpectError(key.bytes, StatusCode::kCorruptFile, "string length");
  GgufBytes value;
  value.Header(3, 0, 1).Str("k").Put<uint32_t>(8).Put<uint64_t>(1ull << 40);
  ExpectError(value.bytes, StatusCode::kCorruptFile, "string length");
  GgufBytes name;
  name.Header(3, 1, 0).Put<uint64_t>(100).Zeros(30);
  ExpectError(name.bytes, StatusCode::kCorruptFile, "name of tensor 0");
}

TEST(GgufReader, TooDeepNesting) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("deep").Put<uint32_t>(9);
  for (int d = 0; d < 40; ++d) b.Put<uint32_t>(9).Put<uint64_t>(1);
  b.Put<uint32_t>(0).Put<uint64_t>(0);
  ExpectError(b.bytes, StatusCode::kCorruptFile, "nested deeper");
  // Within the cap it parses.
  GgufBytes ok;
  ok.Header(3, 0, 1)
      .Str("ok")
      .Put<uint32_t>(9)
      .Put<uint32_t>(9)
      .Put<uint64_t>(1)
      .Put<uint32_t>(0)
      .Put<uint64_t>(2);
  ok.Put<uint8_t>(1).Put<uint8_t>(2);
  EXPECT_TRUE(ParseBytes(ok.bytes).ok());
}

TEST(GgufReader, UnknownValueTypes) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("k").Put<uint32_t>(13).Put<uint32_t>(0);
  ExpectError(b.bytes, StatusCode::kCorruptFile, "unknown value type id 13");
  GgufBytes a;
  a.Header(3, 0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(77).Put<uint64_t>(0);
  ExpectError(a.bytes, StatusCode::kCorruptFile, "unknown array element type id 77");
}

TEST(GgufReader, DuplicateKeysAndTensors) {
  GgufBytes k;
  k.Header(3, 0, 2).KvU32("x", 1).KvU32("x", 2);
  ExpectError(k.bytes, StatusCode::kCorruptFile, "duplicate metadata key 'x'");
  GgufBytes t;
  t.Header(3, 2, 0).Tensor("w", {8}, 0, 0).Tensor("w", {8}, 0, 32).Align().Zeros(64);
  ExpectError(t.bytes, StatusCode::kCorruptFile, "duplicate tensor name 'w'");
}

TEST(GgufReader, TensorOffsetPastEnd) {
  GgufBytes b;
  b.Header(3, 1, 0).Tensor("blk.0.attn_q.weight", {8}, 0, 32).Align().Zeros(32);
  ExpectError(b.bytes, StatusCode::kCorruptFile, "tensor 'blk.0.attn_q.weight': data [");
  ExpectError(b.bytes, StatusCode::kCorruptFile, "past end of file");
  GgufBytes wrap;
  wrap.Header(3, 1, 0).Tensor("w", {8}, 0, ~0ull - 31).Align().Zeros(32);
  ExpectError(wrap.bytes, StatusCode::kCorruptFile, "past end of file");
  GgufBytes huge;
  huge.Header(3, 1, 0).Tensor("w", {1ull << 40, 1ull << 22}, 0, 0).Align().Zeros(32);
  ExpectError(huge.bytes, StatusCode::kCorruptFile, "");
  GgufBytes overflow;
  overflow.Header(3, 1, 0).Tensor("w", {1ull << 40, 1ull << 40}, 0, 0).Align().Zeros(32);
  ExpectError(overflow.bytes, StatusCode::kCorruptFile, "overflows");
}

TEST(GgufReader, OverlappingTensors) {
  GgufBytes b;
  b.Header(3, 2, 0).Tensor("a", {16}, 0, 0).Tensor("b", {8}, 0, 32).Align().Zeros(64);
  ExpectError(b.bytes, StatusCode::kCorruptFile, "overlap");
}

TEST(GgufReader, UnknownTensorType) {
  GgufBytes b;
  b.Header(3, 1, 0).Tensor("blk.3.ffn_up.weight", {8}, 99, 0).Align().Zeros(32);
  ExpectError(b.bytes, StatusCode::kUnsupported, "tensor 'blk.3.ffn_up.weight': unknown tensor type id 99");
}

TEST(GgufReader, MisalignedOffset) {
  GgufBytes b;
  b.Header(3, 1, 0).Tensor("w", {4}, 0, 4).Align().Zeros(64);
  ExpectError(b.bytes, StatusCode::kCorruptFile, "not a multiple of the alignment 32");
}

TEST(GgufReader, CustomAlignment) {
  GgufBytes b;
  b.Header(3, 1, 1).KvU32("general.alignment", 64).Tensor("w", {4}, 0, 0).Align(64).Zeros(16);
  EXPECT_TRUE(ParseBytes(b.bytes).ok());
  GgufBytes bad;
  bad.Header(3, 0, 1).KvU32("general.alignment", 48);
  ExpectError(bad.bytes, StatusCode::kCorruptFile, "power of two");
  GgufBytes zero;
  zero.Header(3, 0, 1).KvU32("general.alignment", 0);
  ExpectError(zero.bytes, StatusCode::kCorruptFile, "power of two");
}

TEST(GgufReader, BadShapes) {
  GgufBytes dims;
  dims.Header(3, 1, 0).Tensor("w", {1, 1, 1, 1, 1}, 0, 0).Align().Zeros(32);
  ExpectError(dims.bytes, StatusCode::kCorruptFile, "n_dims 5");
  GgufBytes block;
  block.Header(3, 1, 0).Tensor("w", {33, 1}, 8, 0).Align().Zeros(128);
  ExpectError(block.bytes, StatusCode::kCorruptFile, "not a multiple of the q8_0 block size 32");
  GgufBytes neg;
  neg.Header(3, 1, 0).Tensor("w", {~0ull}, 0, 0).Align().Zeros(32);
  ExpectError(neg.bytes, StatusCode::kCorruptFile, "ne[0]");
}

TEST(GgufReader, Stories260K) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto src = OpenGguf(::ferry::testing::AssetPath("stories260K.gguf"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const WeightSource& s = **src;
  EXPECT_EQ(s.tensors().size(), 48u);
  EXPECT_EQ(s.metadata().entries().size(), 19u + 1u);  // + ferry.source.format
  EXPECT_EQ(s.metadata().GetString("general.architecture"), "llama");
  EXPECT_EQ(s.metadata().GetInt("llama.block_count"), 5);
  EXPECT_EQ(s.metadata().GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(s.metadata().GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(s.metadata().GetString("ferry.source.format"), "gguf v3");
  const TensorRef* emb = s.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ShapeString(), "[512, 64]");
  EXPECT_EQ(emb->dtype, DType::kF32);
  EXPECT_EQ(s.FindTensor("blk.4.ffn_down.weight")->ShapeString(), "[64, 172]");
  EXPECT_EQ(s.FindTensor("blk.0.attn_k.weight")->ShapeString(), "[32, 64]");
  EXPECT_EQ(s.TensorBytes(), 4u * (260032u + 32768u));  // all weights + the untied output copy
}

TEST(GgufReader, OpenMissingFile) {
  auto src = OpenGguf("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace ferry::formats
