#include "constraint/json_numbers.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ferry::constraint {

namespace {

Expr Digit(char lo, char hi) {
  return Expr::Class({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}});
}
Expr AnyDigits(int32_t n) {
  return Expr::Repeat(Digit('0', '9'), n, n);
}

// Digit strings of s.size() digits that are >= s (ge) or <= s (!ge), compared as numbers.
Expr Compare(const std::string& s, bool ge) {
  if (s.empty()) return Expr::Empty();
  int32_t rest = static_cast<int32_t>(s.size()) - 1;
  std::vector<Expr> alts;
  alts.push_back(Expr::Seq({Expr::Literal(s.substr(0, 1)), Compare(s.substr(1), ge)}));
  if (ge && s[0] < '9') alts.push_back(Expr::Seq({Digit(static_cast<char>(s[0] + 1), '9'), AnyDigits(rest)}));
  if (!ge && s[0] > '0')
    alts.push_back(Expr::Seq({Digit('0', static_cast<char>(s[0] - 1)), AnyDigits(rest)}));
  return Expr::Alt(std::move(alts));
}

// Equal-length digit strings between a and b (a <= b).
Expr SameLength(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  if (i == a.size()) return Expr::Literal(a);
  std::string prefix = a.substr(0, i);
  int32_t rest = static_cast<int32_t>(a.size() - i - 1);
  std::vector<Expr> alts;
  alts.push_back(Expr::Seq({Expr::Literal(a.substr(i, 1)), Compare(a.substr(i + 1), true)}));
  if (b[i] - a[i] > 1)
    alts.push_back(
        Expr::Seq({Digit(static_cast<char>(a[i] + 1), static_cast<char>(b[i] - 1)), AnyDigits(rest)}));
  alts.push_back(Expr::Seq({Expr::Literal(b.substr(i, 1)), Compare(b.substr(i + 1), false)}));
  return Expr::Seq({Expr::Literal(prefix), Expr::Alt(std::move(alts))});
}

uint64_t Pow10(size_t n) {
  uint64_t v = 1;
  while (n--) v *= 10;
  return v;
}

enum class Fraction { kAny, kZero, kNonzero };

struct Piece {
  uint64_t lo;
  std::optional<uint64_t> hi;  // nullopt: unbounded
  Fraction frac;
};

std::vector<Piece> Intersect(const std::vector<Piece>& a, const std::vector<Piece>& b) {
  std::vector<Piece> out;
  for (const Piece& x : a) {
    for (const Piece& y : b) {
      uint64_t lo = std::max(x.lo, y.lo);
      std::optional<uint64_t> hi = !x.hi ? y.hi : !y.hi ? x.hi : std::min(*x.hi, *y.hi);
      if (hi && *hi < lo) continue;
      Fraction f;
      if (x.frac == Fraction::kAny)
        f = y.frac;
      else if (y.frac == Fraction::kAny || y.frac == x.frac)
        f = x.frac;
      else
        continue;
      out.push_back({lo, hi, f});
    }
  }
  return out;
}

// Magnitudes m = I + f (I integer part, 0 <= f < 1) with m >= b (m > b if exclusive).
std::vector<Piece> AtLeast(int64_t b, bool exclusive) {
  if (b < 0) return {{0, std::nullopt, Fraction::kAny}};
  uint64_t u = static_cast<uint64_t>(b);
  if (!exclusive) return {{u, std::nullopt, Fraction::kAny}};
  return {{u + 1, std::nullopt, Fraction::kAny}, {u, u, Fraction::kNonzero}};
}

// Magnitudes with m <= b (m < b if exclusive).
std::vector<Piece> AtMost(int64_t b, bool exclusive) {
  if (b < 0 || (b == 0 && exclusive)) return {};
  uint64_t u = static_cast<uint64_t>(b);
  std::vector<Piece> out;
  if (u > 0) out.push_back({0, u - 1, Fraction::kAny});
  if (!exclusive) out.push_back({u, u, Fraction::kZero});
  return out;
}

const std::vector<Piece> kAll = {{0, std::nullopt, Fraction::kAny}};

Expr FractionExpr(Fraction f) {
  switch (f) {
    case Fraction::kAny:
      return Expr::Optional(Expr::Seq({Expr::Literal("."), Expr::Repeat(Digit('0', '9'), 1, -1)}));
    case Fraction::kZero:
      return Expr::Optional(Expr::Seq({Expr::Literal("."), Expr::Repeat(Expr::Literal("0"), 1, -1)}));
    case Fraction::kNonzero:
      return Expr::Seq(
          {Expr::Literal("."), Expr::Star(Expr::Literal("0")), Digit('1', '9'), Expr::Star(Digit('0', '9'))});
  }
  return Expr::Empty();
}

}  // namespace

Expr UnsignedRange(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<Expr> alts;
  size_t lo_len = std::to_string(lo).size();
  size_t hi_len = hi ? std::to_string(*hi).size() : lo_len;
  if (hi && *hi < lo) return Expr::Class({});
  for (size_t d = lo_len; d <= hi_len; ++d) {
    uint64_t a = std::max(lo, d == 1 ? 0 : Pow10(d - 1));
    uint64_t b = d >= 20 ? UINT64_MAX : Pow10(d) - 1;
    if (hi) b = std::min(b, *hi);
    if (a > b) continue;
    alts.push_back(SameLength(std::to_string(a), std::to_string(b)));
  }
  if (!hi)
    alts.push_back(
        Expr::Seq({Digit('1', '9'), Expr::Repeat(Digit('0', '9'), static_cast<int32_t>(lo_len), -1)}));
  return Expr::Alt(std::move(alts));
}

Expr BoundedNumber(std::optional<NumberBound> min, std::optional<NumberBound> max, bool integer_only) {
  // Non-negative x = m: min <= m <= max. Negative x = -m with m > 0: -max <= m <= -min.
  std::vector<Piece> pos = kAll, neg = AtLeast(0, true);
  if (min) {
    pos = Intersect(pos, AtLeast(min->value, min->exclusive));
    neg = Intersect(neg, AtMost(-min->value, min->exclusive));
  }
  if (max) {
    pos = Intersect(pos, AtMost(max->value, max->exclusive));
    neg = Intersect(neg, AtLeast(-max->value, max->exclusive));
  }
  std::vector<Expr> alts;
  for (int sign = 0; sign < 2; ++sign) {
    for (const Piece& p : sign ? neg : pos) {
      if (integer_only && p.frac == Fraction::kNonzero) continue;
      std::vector<Expr> seq;
      if (sign) seq.push_back(Expr::Literal("-"));
      seq.push_back(UnsignedRange(p.lo, p.hi));
      if (!integer_only) seq.push_back(FractionExpr(p.frac));
      alts.push_back(Expr::Seq(std::move(seq)));
    }
  }
  if (alts.empty()) return Expr::Class({});
  return Expr::Alt(std::move(alts));
}

}  // namespace ferry::constraint
