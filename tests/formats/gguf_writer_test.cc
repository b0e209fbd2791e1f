#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "gguf_bytes.h"
#include "test_util.h"

namespace ferry::formats {
namespace {

using Type = MetaValue::Type;

Metadata EveryValueType() {
  Metadata m;
  m.SetString("general.architecture", "llama");
  m.Set("v.u8", MetaValue::Uint(250, Type::kU8));
  m.Set("v.i8", MetaValue::Int(-100, Type::kI8));
  m.Set("v.u16", MetaValue::Uint(65000, Type::kU16));
  m.Set("v.i16", MetaValue::Int(-32000, Type::kI16));
  m.Set("v.u32", MetaValue::Uint(4000000000u, Type::kU32));
  m.Set("v.i32", MetaValue::Int(-2000000000, Type::kI32));
  m.Set("v.u64", MetaValue::Uint(18000000000000000000ull, Type::kU64));
  m.Set("v.i64", MetaValue::Int(-9000000000000000000ll, Type::kI64));
  m.Set("v.f32", MetaValue::Float(1e-5f, Type::kF32));
  m.Set("v.f64", MetaValue::Float(3.141592653589793, Type::kF64));
  m.SetBool("v.bool", true);
  m.SetString("v.string", std::string("with\0nul ünïcode", sizeof("with\0nul ünïcode") - 1));
  m.SetStringArray("v.strings", {"a", "", "ccc"});
  m.SetFloatArray("v.floats", {0.5f, -2.0f});
  m.SetIntArray("v.ints", {1, -2, 3});
  m.Set("v.empty", MetaValue::Array(Type::kU16, {}));
  m.Set("v.nested",
        MetaValue::Array(Type::kArray, {MetaValue::Array(Type::kI8, {MetaValue::Int(1, Type::kI8)}),
                                        MetaValue::Array(Type::kString, {MetaValue::String("x")})}));
  return m;
}

void ExpectSameValue(const MetaValue& a, const MetaValue& b, const std::string& key) {
  ASSERT_EQ(a.type, b.type) << key;
  switch (a.type) {
    case Type::kString:
      EXPECT_EQ(a.s, b.s) << key;
      break;
    case Type::kF32:
      EXPECT_EQ(static_cast<float>(a.f), static_cast<float>(b.f)) << key;
      break;
    case Type::kF64:
      EXPECT_EQ(a.f, b.f) << key;
      break;
    case Type::kArray:
      ASSERT_EQ(a.elem_type, b.elem_type) << key;
      ASSERT_EQ(a.arr.size(), b.arr.size()) << key;
      for (size_t k = 0; k < a.arr.size(); ++k) ExpectSameValue(a.arr[k], b.arr[k], key);
      break;
    default:
      EXPECT_EQ(a.i, b.i) << key;
      EXPECT_EQ(a.u, b.u) << key;
  }
}

class GgufRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTrip, EveryValueTypeAndTensorBytes) {
  const uint32_t alignment = GetParam();
  const Metadata meta = EveryValueType();
  std::vector<float> a(3 * 5);  // [3, 5]
  for (size_t k = 0; k < a.size(); ++k) a[k] = static_cast<float>(k) * 0.25f - 1;
  std::vector<uint8_t> q(2 * 34);  // q8_0 [2, 32]: one block per row
  for (size_t k = 0; k < q.size(); ++k) q[k] = static_cast<uint8_t>(k * 7);
  std::vector<int32_t> ids = {7, -1, 42};  // [3]
  std::vector<uint16_t> h = {0x3c00};      // f16 scalar
  std::vector<GgufTensorToWrite> tensors = {
      {"a.weight", DType::kF32, {3, 5}, a.data(), a.size() * 4},
      {"q.weight", DType::kQ8_0, {2, 32}, q.data(), q.size()},
      {"ids", DType::kI32, {3}, ids.data(), ids.size() * 4},
      {"scalar", DType::kF16, {}, h.data(), 2},
  };
  const std::string path = ::ferry::testing::TempDir() + "/rt.gguf";
  GgufWriteOptions opts;
  opts.alignment = alignment;
  ASSERT_TRUE(WriteGguf(path, meta, tensors, opts).ok());

  auto src = OpenGguf(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const Metadata& got = (*src)->metadata();
  // File order kept; general.alignment only when not the default; then Ferry's source key.
  size_t k = 0;
  for (const auto& [key, value] : meta.entries()) {
    ASSERT_LT(k, got.entries().size());
    EXPECT_EQ(got.entries()[k].first, key);
    ExpectSameValue(value, got.entries()[k].second, key);
    ++k;
  }
  if (alignment != 32) {
    EXPECT_EQ(got.entries()[k].first, "general.alignment");
    EXPECT_EQ(got.entries()[k].second.type, Type::kU32);
    EXPECT_EQ(got.GetInt("general.alignment"), alignment);
    ++k;
  } else {
    EXPECT_FALSE(got.Has("general.alignment"));
  }
  ASSERT_EQ(got.entries().size(), k + 1);
  EXPECT_EQ(got.GetString("ferry.source.format"), "gguf v3");

  ASSERT_EQ((*src)->tensors().size(), tensors.size());
  const uint8_t* base = nullptr;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorRef& ref = (*src)->tensors()[t];
    EXPECT_EQ(ref.name, tensors[t].name);
    EXPECT_EQ(ref.dtype, tensors[t].dtype);
    EXPECT_EQ(ref.shape, tensors[t].shape);
    ASSERT_EQ(ref.nbytes, tensors[t].nbytes);
    EXPECT_EQ(std::memcmp(ref.data, tensors[t].data, ref.nbytes), 0) << ref.name;
    if (t == 0) base = static_cast<const uint8_t*>(ref.data);
    EXPECT_EQ((static_cast<const uint8_t*>(ref.data) - base) % alignment, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ref.data) % alignment, 0u);  // mmap is page aligned
  }
  EXPECT_EQ((*src)->FindTensor("q.weight")->ShapeString(), "[2, 32]");
  EXPECT_EQ((*src)->FindTensor("a.weight")->NumElements(), 15);
  EXPECT_EQ((*src)->FindTensor("missing"), nullptr);
  EXPECT_EQ((*src)->TensorBytes(), 60u + 68u + 12u + 2u);

  // Writing what was read gives the same file (source-only keys are dropped).
  const std::string path2 = ::ferry::testing::TempDir() + "/rt2.gguf";
  std::vector<GgufTensorToWrite> again;
  for (const TensorRef& ref : (*src)->tensors())
    again.push_back({ref.name, ref.dtype, ref.shape, ref.data, ref.nbytes});
  ASSERT_TRUE(WriteGguf(path2, got, again, opts).ok());
  EXPECT_EQ(::ferry::testing::ReadFileBytes(path), ::ferry::testing::ReadFileBytes(path2));
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufRoundTrip, ::testing::Values(32u, 64u, 8u));

TEST(GgufWriter, RejectsBadInput) {
  const std::string path = ::ferry::testing::TempDir() + "/bad.gguf";
  std::vector<float> a(4);
  Metadata meta;
  EXPECT_FALSE(WriteGguf(path, meta, {{"a", DType::kF32, {4}, a.data(), 12}}).ok());   // size mismatch
  EXPECT_FALSE(WriteGguf(path, meta, {{"a", DType::kQ8_0, {4}, a.data(), 16}}).ok());  // not a block multiple
  EXPECT_FALSE(
      WriteGguf(path, meta, {{"a", DType::kF32, {4}, a.data(), 16}, {"a", DType::kF32, {4}, a.data(), 16}})
          .ok());  // duplicate
  EXPECT_FALSE(WriteGguf(path, meta, {{"a", DType::kF32, {1, 1, 1, 1, 4}, a.data(), 16}}).ok());
  GgufWriteOptions opts;
  opts.alignment = 24;
  EXPECT_FALSE(WriteGguf(path, meta, {}, opts).ok());
  Metadata mixed;
  mixed.Set("x", MetaValue::Array(Type::kI32, {MetaValue::String("no")}));
  EXPECT_FALSE(WriteGguf(path, mixed, {}).ok());
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// The streamed writer takes tensors one at a time in the header's order and leaves a file under
// the real name only after Finish(): an abandoned, short or oversize write leaves the previous
// file untouched and no temp file behind.
TEST(GgufStreamWriter, WritesInOrderAndNeverLeavesAHalfFile) {
  const std::string path = ::ferry::testing::TempDir() + "/stream.gguf";
  Metadata meta;
  meta.SetString("general.architecture", "llama");
  std::vector<float> a = {1, 2, 3, 4};     // [4]
  std::vector<float> b = {5, 6, 7, 8, 9};  // [5]
  const std::vector<GgufTensorInfo> infos = {{"a", DType::kF32, {4}}, {"b", DType::kF32, {5}}};
  ASSERT_TRUE(WriteGguf(path, meta, {{"old", DType::kF32, {4}, a.data(), 16}}).ok());
  const std::vector<uint8_t> old_bytes = ::ferry::testing::ReadFileBytes(path);

  {  // abandoned after one tensor
    auto w = GgufStreamWriter::Create(path, meta, infos);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->Append(a.data(), 16).ok());
    EXPECT_EQ(w->next(), 1u);
    EXPECT_TRUE(Exists(path + ".tmp"));
  }
  EXPECT_FALSE(Exists(path + ".tmp"));
  EXPECT_EQ(::ferry::testing::ReadFileBytes(path), old_bytes);

  {  // Finish() before every tensor: an error naming the next one, and no file
    auto w = GgufStreamWriter::Create(path, meta, infos);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Append(a.data(), 16).ok());
    const Status st = w->Finish();
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("1 of 2 tensors written (next: 'b')"), std::string::npos) << st.message();
    EXPECT_FALSE(Exists(path + ".tmp"));
    EXPECT_FALSE(w->Append(b.data(), 20).ok());  // abandoned for good
  }
  {  // a wrong size is refused and abandons the file
    auto w = GgufStreamWriter::Create(path, meta, infos);
    ASSERT_TRUE(w.ok());
    const Status st = w->Append(a.data(), 12);
    EXPECT_NE(st.message().find("'a' f32 shape needs 16 bytes but 12 were given"), std::string::npos)
        << st.message();
    EXPECT_FALSE(Exists(path + ".tmp"));
  }
  {  // one tensor too many
    auto w = GgufStreamWriter::Create(path, meta, {{"a", DType::kF32, {4}}});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Append(a.data(), 16).ok());
    EXPECT_FALSE(w->Append(a.data(), 16).ok());
    EXPECT_FALSE(w->Finish().ok());
  }
  EXPECT_EQ(::ferry::testing::ReadFileBytes(path), old_bytes);

  // Moved, then finished: the file WriteGguf writes for the same tensors, byte for byte.
  auto w = GgufStreamWriter::Create(path, meta, infos);
  ASSERT_TRUE(w.ok());
  GgufStreamWriter moved = std::move(*w);
  ASSERT_TRUE(moved.Append(a.data(), 16).ok());
  ASSERT_TRUE(moved.Append(b.data(), 20).ok());
  ASSERT_TRUE(moved.Finish().ok());
  EXPECT_FALSE(Exists(path + ".tmp"));
  const std::string whole = ::ferry::testing::TempDir() + "/whole.gguf";
  ASSERT_TRUE(
      WriteGguf(whole, meta, {{"a", DType::kF32, {4}, a.data(), 16}, {"b", DType::kF32, {5}, b.data(), 20}})
          .ok());
  EXPECT_EQ(::ferry::testing::ReadFileBytes(path), ::ferry::testing::ReadFileBytes(whole));
  auto src = OpenGguf(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->tensors().size(), 2u);
  EXPECT_EQ(std::memcmp((*src)->FindTensor("b")->data, b.data(), 20), 0);
}

}  // namespace
}  // namespace ferry::formats
