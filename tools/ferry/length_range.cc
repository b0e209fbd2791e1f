#include "length_range.h"

namespace ferry::cli {

StatusOr<LengthRange> ParseLengthRange(const std::string& s, const char* flag) {
  LengthRange r;
  const size_t colon = s.find(':');
  try {
    r.lo = std::stoi(s.substr(0, colon));
    r.hi = colon == std::string::npos ? r.lo : std::stoi(s.substr(colon + 1));
  } catch (...) {
    return InvalidArgumentError("{} '{}': expected N or MIN:MAX (e.g. 32:512)", flag, s);
  }
  if (r.lo <= 0 || r.hi < r.lo) return InvalidArgumentError("{} '{}': need 0 < MIN <= MAX", flag, s);
  return r;
}

}  // namespace ferry::cli
