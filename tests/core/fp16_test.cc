#include "core/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ferry {
namespace {

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), h) << h;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(Fp16ToFp32(0x7BFF), 65504.0f);
  EXPECT_EQ(Fp32ToFp16(1e6f), 0x7C00);  // overflow -> inf
  EXPECT_EQ(Fp32ToFp16(1.0f + 1.0f / 4096), 0x3C00);  // ties to even
}

TEST(Bf16, RoundTrip) {
  EXPECT_EQ(Bf16ToFp32(Fp32ToBf16(1.5f)), 1.5f);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(NAN))));
}

}  // namespace
}  // namespace ferry
