// Integer and number ranges as grammar expressions (JSON number text).
#pragma once

#include <cstdint>
#include <optional>

#include "constraint/grammar.h"

namespace ferry::constraint {

struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// Decimal integers (no leading zeros) in [lo, hi]; hi = nullopt: unbounded. 0 <= lo.
Expr UnsignedRange(uint64_t lo, std::optional<uint64_t> hi);
// JSON numbers x with min <= x <= max (strict where exclusive); integer_only: no fraction.
// Written without an exponent. Empty Class when no value satisfies the bounds.
Expr BoundedNumber(std::optional<NumberBound> min, std::optional<NumberBound> max, bool integer_only);

}  // namespace ferry::constraint
