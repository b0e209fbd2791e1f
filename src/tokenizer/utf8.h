// UTF-8 helpers for the tokenizer: character lengths as llama.cpp counts them, well-formedness
// checks (Unicode Table 3-7) and replacement of ill-formed bytes by U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"  // AppendCodepoint, DecodeCodepoint

namespace ferry::utf8 {

// Length of the UTF-8 sequence a lead byte announces, by its high nibble, exactly as
// llama.cpp's unicode_len_utf8: 0x00-0xBF -> 1 (continuation bytes count as one), 0xC0-0xDF -> 2,
// 0xE0-0xEF -> 3, 0xF0-0xFF -> 4. The SPM encoder splits text into symbols with it.
inline size_t SymbolLength(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// What starts at `s[0]` (s non-empty).
enum class SeqState {
  kComplete,   // a well-formed character of `len` bytes
  kTruncated,  // a well-formed prefix of `len` bytes that `s` ends in the middle of
  kInvalid,    // ill-formed: `len` bytes (the maximal well-formed prefix, at least 1) to replace
};
struct Seq {
  SeqState state;
  size_t len;
};
Seq Inspect(std::string_view s);

// True if `s` is well-formed UTF-8.
bool IsValid(std::string_view s);

// Replaces each maximal ill-formed subsequence by U+FFFD (the Unicode "maximal subpart"
// practice, as WHATWG decoders do). A truncated character at the end becomes one U+FFFD.
std::string Sanitize(std::string_view s);

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 '▁'
// s with every kSpaceMarker turned back into a plain space.
std::string UnescapeSpaces(std::string_view s);

}  // namespace ferry::utf8
