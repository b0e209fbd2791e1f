#include "tokenizer/unicode.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace ferry::unicode {

uint16_t Flags(uint32_t cp) {
  if (cp > 0x10FFFF) return kUndefined;
  // Last range starting at or before cp.
  const data::FlagRange* end = data::kFlagRanges + data::kNumFlagRanges;
  const data::FlagRange* it = std::upper_bound(
      data::kFlagRanges, end, cp, [](uint32_t c, const data::FlagRange& r) { return c < r.start; });
  return (it - 1)->flags;
}

bool IsWhitespace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 9 && cp <= 13) || cp == 0x20;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t ToLower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  const data::CodepointPair* end = data::kLowercase + data::kLowercaseSize;
  const data::CodepointPair* it = std::lower_bound(
      data::kLowercase, end, cp, [](const data::CodepointPair& p, uint32_t c) { return p.from < c; });
  return (it != end && it->from == cp) ? it->to : cp;
}

uint32_t NfdBase(uint32_t cp) {
  if (cp < 0xC0) return cp;
  const data::NfdRange* end = data::kNfdBase + data::kNfdBaseSize;
  const data::NfdRange* it = std::upper_bound(
      data::kNfdBase, end, cp, [](uint32_t c, const data::NfdRange& r) { return c < r.first; });
  if (it == data::kNfdBase) return cp;
  --it;
  return cp <= it->last ? it->base : cp;
}

uint32_t DecodeCodepoint(std::string_view s, size_t* len) {
  size_t pos = 0;
  uint32_t cp;
  if (!utf8::DecodeCodepoint(s, &pos, &cp)) {
    *len = 1;
    return 0xFFFD;
  }
  *len = pos;
  return cp;
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_char;
  std::array<uint32_t, 256> cp;
  ByteMap() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      cp[b] = printable ? b : next++;
      utf8::AppendCodepoint(to_char[b], cp[b]);
    }
  }
};

const ByteMap& GetByteMap() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& ByteToChar(uint8_t b) { return GetByteMap().to_char[b]; }

int CharToByte(uint32_t cp) {
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) {
    return static_cast<int>(cp);
  }
  if (cp < 256 || cp >= 256 + 68) return -1;
  const ByteMap& m = GetByteMap();
  for (int b = 0; b < 256; ++b) {
    if (m.cp[static_cast<size_t>(b)] == cp) return b;
  }
  return -1;
}

}  // namespace ferry::unicode
