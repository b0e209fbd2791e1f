#include "core/dtype.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

TEST(DType, SizesMatchGgml) {
  EXPECT_EQ(Traits(DType::kQ4_0).block_bytes, 18u);
  EXPECT_EQ(Traits(DType::kQ8_0).block_bytes, 34u);
  EXPECT_EQ(Traits(DType::kQ4_K).block_bytes, 144u);
  EXPECT_EQ(Traits(DType::kQ6_K).block_bytes, 210u);
  EXPECT_EQ(RowBytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(RowBytes(DType::kF16, 10), 20u);
}

TEST(DType, LookupByIdAndName) {
  EXPECT_EQ(FindDType(12)->type, DType::kQ4_K);
  EXPECT_FALSE(FindDType(4).has_value());  // removed q4_2
  EXPECT_FALSE(FindDType(9999).has_value());
  EXPECT_EQ(DTypeFromName("Q8_0"), DType::kQ8_0);
  EXPECT_FALSE(DTypeFromName("q9_9").has_value());
}

TEST(DType, RowBytesCheckedRejectsRaggedAndOverflow) {
  EXPECT_FALSE(RowBytesChecked(DType::kQ4_0, 33).has_value());
  EXPECT_FALSE(RowBytesChecked(DType::kF32, -1).has_value());
  EXPECT_FALSE(RowBytesChecked(DType::kF32, INT64_MAX).has_value());
  EXPECT_EQ(*RowBytesChecked(DType::kQ8_0, 64), 68u);
}

}  // namespace
}  // namespace ferry
