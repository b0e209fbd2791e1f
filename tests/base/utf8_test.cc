// base/utf8.h: one code point's encoding and strict decoding (Unicode Table 3-7).
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace ferry::utf8 {
namespace {

TEST(Utf8Codepoint, AppendsEachLengthsBytes) {
  std::string s;
  for (uint32_t cp :
       {0x41u, 0x7Fu, 0x80u, 0xE4u, 0x7FFu, 0x800u, 0x2581u, 0xFFFFu, 0x10000u, 0x1F999u, 0x10FFFFu})
    AppendCodepoint(s, cp);
  EXPECT_EQ(
      s,
      "A\x7F\xC2\x80\xC3\xA4\xDF\xBF\xE0\xA0\x80\xE2\x96\x81\xEF\xBF\xBF\xF0\x90\x80\x80\xF0\x9F\xA6\x99"
      "\xF4\x8F\xBF\xBF");
}

// Every scalar value (all but the surrogates) round-trips through Append and Decode, one at a
// time and as a run, and each decode moves past exactly its own bytes.
TEST(Utf8Codepoint, EveryScalarValueRoundTrips) {
  std::string all;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string one;
    AppendCodepoint(one, cp);
    size_t pos = 0;
    uint32_t got = 0xFFFFFFFF;
    ASSERT_TRUE(DecodeCodepoint(one, &pos, &got)) << std::hex << cp;
    ASSERT_EQ(got, cp);
    ASSERT_EQ(pos, one.size()) << std::hex << cp;
    if (cp % 4099 == 0) all += one;
  }
  size_t pos = 0, n = 0;
  uint32_t cp;
  while (DecodeCodepoint(all, &pos, &cp)) ++n;
  EXPECT_EQ(pos, all.size());
  EXPECT_EQ(n, 272u);  // the multiples of 4099 up to U+10FFFF outside the surrogates
}

TEST(Utf8Codepoint, RejectsIllFormedBytesAndLeavesPositionAndValue) {
  for (std::string_view bad : {
           std::string_view("\x80"),                  // stray continuation byte
           std::string_view("\xC0\x80"),              // overlong NUL
           std::string_view("\xC1\xBF"),              // overlong 0x7F
           std::string_view("\xE0\x9F\xBF"),          // overlong 0x7FF
           std::string_view("\xF0\x8F\xBF\xBF"),      // overlong 0xFFFF
           std::string_view("\xED\xA0\x80"),          // U+D800, a surrogate
           std::string_view("\xED\xBF\xBF"),          // U+DFFF
           std::string_view("\xF4\x90\x80\x80"),      // U+110000
           std::string_view("\xF8\x88\x80\x80\x80"),  // a 5-byte form
           std::string_view("\xFF"),
           std::string_view("\xE2\x96"),  // truncated
           std::string_view("\xC3\x41"),  // a continuation byte missing
           std::string_view(""),
       }) {
    size_t pos = 0;
    uint32_t cp = 7;
    EXPECT_FALSE(DecodeCodepoint(bad, &pos, &cp)) << testing::PrintToString(std::string(bad));
    EXPECT_EQ(pos, 0u);
    EXPECT_EQ(cp, 7u);
  }
  // Decoding stops at the first bad character, after the good ones before it.
  const std::string_view s = "a\xC3\xA4\xED\xA0\x80z";
  size_t pos = 0;
  uint32_t cp;
  EXPECT_TRUE(DecodeCodepoint(s, &pos, &cp));
  EXPECT_TRUE(DecodeCodepoint(s, &pos, &cp));
  EXPECT_EQ(cp, 0xE4u);
  EXPECT_FALSE(DecodeCodepoint(s, &pos, &cp));
  EXPECT_EQ(pos, 3u);
}

}  // namespace
}  // namespace ferry::utf8
