// Unicode facts the tokenizers need: code point decoding, general-category flags (as llama.cpp
// groups them), the White_Space set, simple lowercase, first code point of the canonical
// decomposition (llama.cpp's accent stripping) and GPT-2's byte <-> printable-character map.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::unicode {

// Category flags of a code point (one bit per general-category letter; Cn is kUndefined).
enum Flag : uint16_t {
  kNumber = 1 << 0,       // N*
  kLetter = 1 << 1,       // L*
  kSeparator = 1 << 2,    // Z*
  kAccentMark = 1 << 3,   // M*
  kPunctuation = 1 << 4,  // P*
  kSymbol = 1 << 5,       // S*
  kControl = 1 << 6,      // Cc, Cf, Co, Cs
  kUndefined = 1 << 7,    // Cn
};

uint16_t Flags(uint32_t cp);
// Unicode White_Space: 9-13, 0x20, 0x85, 0xA0, 0x1680, 0x2000-0x200A, 0x2028, 0x2029, 0x202F,
// 0x205F, 0x3000 (what llama.cpp and HF's regex engines call \s).
bool IsWhitespace(uint32_t cp);
uint32_t ToLower(uint32_t cp);
// First code point of the canonical decomposition (the base letter of an accented letter).
uint32_t NfdBase(uint32_t cp);

// Decodes the code point at s[0] (s non-empty). Ill-formed or truncated sequences give 0xFFFD
// and *len = 1.
uint32_t DecodeCodepoint(std::string_view s, size_t* len);

// GPT-2's reversible byte -> character map: printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100.. in order. ByteToChar(b) is the UTF-8 of that character.
const std::string& ByteToChar(uint8_t b);
// Inverse: the byte whose character is the code point `cp`, or -1.
int CharToByte(uint32_t cp);

namespace data {
struct FlagRange {
  uint32_t start;
  uint16_t flags;
};
struct CodepointPair {
  uint32_t from;
  uint32_t to;
};
struct NfdRange {
  uint32_t first;
  uint32_t last;
  uint32_t base;
};
extern const FlagRange kFlagRanges[];
extern const size_t kNumFlagRanges;
extern const CodepointPair kLowercase[];
extern const size_t kLowercaseSize;
extern const NfdRange kNfdBase[];
extern const size_t kNfdBaseSize;
}  // namespace data

}  // namespace ferry::unicode
