#include "base/utf8.h"

namespace ferry::utf8 {

void AppendCodepoint(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool DecodeCodepoint(std::string_view s, size_t* pos, uint32_t* cp) {
  const size_t i = *pos;
  if (i >= s.size()) return false;
  const auto b = static_cast<uint8_t>(s[i]);
  const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + static_cast<size_t>(n) > s.size()) return false;
  uint32_t c = n == 1 ? b : b & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    const auto x = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
    if ((x & 0xC0) != 0x80) return false;
    c = (c << 6) | (x & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form per length
  if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
  *cp = c;
  *pos = i + static_cast<size_t>(n);
  return true;
}

}  // namespace ferry::utf8
