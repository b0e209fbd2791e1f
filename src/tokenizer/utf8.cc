#include "tokenizer/utf8.h"

namespace ferry::utf8 {

Seq Inspect(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {SeqState::kComplete, 1};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {SeqState::kInvalid, 1};  // continuation byte, C0, C1 or F5..FF
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= s.size()) return {SeqState::kTruncated, k};
    const auto b = static_cast<uint8_t>(s[k]);
    const uint8_t klo = k == 1 ? lo : 0x80, khi = k == 1 ? hi : 0xBF;
    if (b < klo || b > khi) return {SeqState::kInvalid, k};
  }
  return {SeqState::kComplete, need};
}

bool IsValid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    Seq q = Inspect(s.substr(i));
    if (q.state != SeqState::kComplete) return false;
    i += q.len;
  }
  return true;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    Seq q = Inspect(s.substr(i));
    if (q.state == SeqState::kComplete) {
      out.append(s.substr(i, q.len));
    } else {
      out.append(kReplacement);
    }
    i += q.len;
  }
  return out;
}

std::string UnescapeSpaces(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      r.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      r.push_back(s[i++]);
    }
  }
  return r;
}

}  // namespace ferry::utf8
