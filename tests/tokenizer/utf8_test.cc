// UTF-8 helpers: well-formedness per Unicode Table 3-7 and maximal-subpart replacement.
#include <gtest/gtest.h>

#include "tokenizer/utf8.h"

namespace ferry::utf8 {
namespace {

TEST(Utf8, SymbolLengthMatchesLlamaCpp) {
  EXPECT_EQ(SymbolLength('a'), 1u);
  EXPECT_EQ(SymbolLength(0x80), 1u);  // a stray continuation byte is its own symbol
  EXPECT_EQ(SymbolLength(0xC3), 2u);
  EXPECT_EQ(SymbolLength(0xE2), 3u);
  EXPECT_EQ(SymbolLength(0xF0), 4u);
  EXPECT_EQ(SymbolLength(0xFF), 4u);
}

TEST(Utf8, Validity) {
  EXPECT_TRUE(IsValid(""));
  EXPECT_TRUE(IsValid("plain ascii"));
  EXPECT_TRUE(IsValid("\xC3\xA4\xE2\x96\x81\xF0\x9F\xA6\x99"));  // ä ▁ 🦙
  EXPECT_FALSE(IsValid("\xC0\x80"));          // overlong
  EXPECT_FALSE(IsValid("\xE0\x80\x80"));      // overlong
  EXPECT_FALSE(IsValid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValid("\xE2\x96"));          // truncated
  EXPECT_FALSE(IsValid("\x80"));
}

TEST(Utf8, SanitizeUsesMaximalSubparts) {
  const std::string r(kReplacement);
  EXPECT_EQ(Sanitize("ok"), "ok");
  EXPECT_EQ(Sanitize("a\xE2\x96" "b"), "a" + r + "b");   // one U+FFFD for a broken 3-byte char
  EXPECT_EQ(Sanitize("\xE2\x96"), r);                     // truncated at the end
  EXPECT_EQ(Sanitize("\x80\x80"), r + r);                 // each stray continuation byte
  EXPECT_EQ(Sanitize("\xF0\x9F\xA6"), r);
  EXPECT_EQ(Sanitize("\xED\xA0\x80"), r + r + r);         // ED A0 is not a valid prefix
  EXPECT_EQ(Sanitize("\xFF" "x"), r + "x");
}

}  // namespace
}  // namespace ferry::utf8
