// The request-length flags of the load generators (`--input-len`, `--output-len`): "N" or
// "MIN:MAX", lengths drawn uniformly from the range.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace ferry::cli {

struct LengthRange {
  int32_t lo = 0, hi = 0;  // inclusive, 0 < lo <= hi
};

StatusOr<LengthRange> ParseLengthRange(const std::string& s, const char* flag);

}  // namespace ferry::cli
