#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf_bytes.h"
#include "test_util.h"

namespace ferry::formats {
namespace {

// header JSON + data bytes, as a safetensors image.
std::vector<uint8_t> Image(const std::string& header, size_t data_bytes) {
  const uint64_t n = header.size();
  std::string image(reinterpret_cast<const char*>(&n), 8);
  image += header;
  image.append(data_bytes, '\0');
  return std::vector<uint8_t>(image.begin(), image.end());
}

StatusOr<std::vector<SafetensorsTensor>> Parse(const std::vector<uint8_t>& bytes,
                                               std::unique_ptr<uint8_t[]>* keep) {
  keep->reset(new uint8_t[bytes.size()]);  // exact size: sanitizers catch overreads
  if (!bytes.empty()) std::memcpy(keep->get(), bytes.data(), bytes.size());
  return ParseSafetensors(keep->get(), bytes.size(), "test.safetensors");
}

void ExpectError(const std::vector<uint8_t>& bytes, StatusCode code, const std::string& needle) {
  std::unique_ptr<uint8_t[]> keep;
  auto r = Parse(bytes, &keep);
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("test.safetensors"), std::string::npos) << r.status().message();
}

TEST(Safetensors, WriteReadRoundTrip) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};   // [2, 3]
  std::vector<uint16_t> h = {0x3c00, 0xbc00};  // f16 [2]
  std::vector<uint16_t> bf = {0x3f80};         // bf16 [1]
  std::vector<int64_t> ids = {-5, 9};          // i64 [2]
  std::vector<int8_t> b = {-1, 2, 3};          // i8 [3]
  std::vector<SafetensorsTensor> tensors = {
      {"model.a", DType::kF32, {2, 3}, a.data(), 24},
      {"h", DType::kF16, {2}, h.data(), 4},
      {"bf", DType::kBF16, {1}, bf.data(), 2},
      {"ids", DType::kI64, {2}, ids.data(), 16},
      {"b", DType::kI8, {3}, b.data(), 3},
      {"empty", DType::kF32, {0, 4}, nullptr, 0},
  };
  const std::string path = ::ferry::testing::TempDir() + "/t.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  std::vector<uint8_t> bytes = ::ferry::testing::ReadFileBytes(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
  std::unique_ptr<uint8_t[]> keep;
  auto got = Parse(bytes, &keep);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), tensors.size());
  for (const SafetensorsTensor& want : tensors) {
    const SafetensorsTensor* t = nullptr;
    for (const auto& g : *got)
      if (g.name == want.name) t = &g;
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->dtype, want.dtype);
    EXPECT_EQ(t->shape, want.shape);
    ASSERT_EQ(t->nbytes, want.nbytes);
    if (want.nbytes) {
      EXPECT_EQ(std::memcmp(t->data, want.data, want.nbytes), 0) << want.name;
    }
  }
  // Every prefix is an error (the last tensor ends the file).
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    std::unique_ptr<uint8_t[]> k;
    EXPECT_FALSE(Parse(prefix, &k).ok()) << "prefix of " << len << " bytes parsed";
  }
}

TEST(Safetensors, WriterRejectsBadInput) {
  const std::string path = ::ferry::testing::TempDir() + "/bad.safetensors";
  std::vector<float> a(4);
  EXPECT_FALSE(WriteSafetensors(path, {{"a", DType::kF32, {4}, a.data(), 12}}).ok());
  EXPECT_FALSE(WriteSafetensors(path, {{"a", DType::kQ8_0, {32}, a.data(), 34}}).ok());
  EXPECT_FALSE(
      WriteSafetensors(path, {{"a", DType::kF32, {4}, a.data(), 16}, {"a", DType::kF32, {4}, a.data(), 16}})
          .ok());
}

TEST(Safetensors, MetadataIgnored) {
  std::unique_ptr<uint8_t[]> keep;
  auto r = Parse(
      Image(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
      &keep);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "w");
}

TEST(Safetensors, BadHeaders) {
  ExpectError({1, 2, 3}, StatusCode::kCorruptFile, "truncated");
  ExpectError(Image("{", 0), StatusCode::kCorruptFile, "not valid JSON");
  ExpectError(Image("[1, 2]", 0), StatusCode::kCorruptFile, "not a JSON object");
  std::vector<uint8_t> huge = Image("{}", 0);
  uint64_t n = ~0ull;
  std::memcpy(huge.data(), &n, 8);
  ExpectError(huge, StatusCode::kCorruptFile, "header length");
  ExpectError(Image(R"({"w":5})", 0), StatusCode::kCorruptFile, "tensor 'w'");
  ExpectError(Image(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), StatusCode::kCorruptFile, "dtype");
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
              StatusCode::kCorruptFile, "non-negative");
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), StatusCode::kCorruptFile,
              "data_offsets");
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4),
              StatusCode::kCorruptFile, "overflows");
}

TEST(Safetensors, BadOffsets) {
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), StatusCode::kCorruptFile,
              "outside the data section");
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), StatusCode::kCorruptFile,
              "outside the data section");
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 12),
              StatusCode::kCorruptFile, "needs 12");
  ExpectError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    12),
              StatusCode::kCorruptFile, "overlap");
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551615,3]}})", 8),
              StatusCode::kCorruptFile, "outside");
}

TEST(Safetensors, UnsupportedDtype) {
  ExpectError(Image(R"({"model.w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4),
              StatusCode::kUnsupported, "tensor 'model.w': dtype F8_E4M3");
}

}  // namespace
}  // namespace ferry::formats
