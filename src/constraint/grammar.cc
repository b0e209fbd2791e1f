#include "constraint/grammar.h"

#include <algorithm>
#include <map>

#include "base/check.h"

namespace ferry::constraint {

namespace {
constexpr uint32_t kMaxCodepoint = 0x10FFFF;
// Bounded repeats unroll into that many helper rules; a larger count is an error rather than
// an unbounded allocation.
constexpr int32_t kMaxRepeat = 10000;
}  // namespace

Expr Expr::Literal(std::string bytes) {
  Expr e;
  e.kind = Kind::kLiteral;
  e.literal = std::move(bytes);
  return e;
}
Expr Expr::Class(CodepointRanges ranges) {
  Expr e;
  e.kind = Kind::kClass;
  e.ranges = NormalizeRanges(std::move(ranges));
  return e;
}
Expr Expr::Ref(int32_t rule) {
  Expr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return e;
}
Expr Expr::Seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kSeq;
  e.items = std::move(items);
  return e;
}
Expr Expr::Alt(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.items = std::move(items);
  return e;
}
Expr Expr::Repeat(Expr item, int32_t min, int32_t max) {
  // A repeat of a repeat that means the same as one repeat ((x+)+, (x*)+, (x?)*, ...) is
  // folded: stacked, each level doubles the ways to split the same bytes, and the matcher's
  // parse stacks grow as 2^levels.
  if (item.kind == Kind::kRepeat && max != 0) {
    const Expr& in = item.items[0];
    if (item.max < 0 && item.min <= 1) return Repeat(Expr(in), item.min * min, -1);
    if (item.min == 0 && item.max == 1) return Repeat(Expr(in), 0, max);
  }
  Expr e;
  e.kind = Kind::kRepeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

Expr Expr::TokenId(int32_t id, bool negated) {
  Expr e;
  e.kind = Kind::kToken;
  e.rule = id;
  e.min = negated ? 1 : 0;
  return e;
}
Expr Expr::TokenText(std::string text, bool negated) {
  Expr e;
  e.kind = Kind::kToken;
  e.literal = std::move(text);
  e.min = negated ? 1 : 0;
  return e;
}

CodepointRanges NormalizeRanges(CodepointRanges r) {
  for (auto& [lo, hi] : r) {
    hi = std::min(hi, kMaxCodepoint);
    if (lo > hi) lo = hi + 1;  // dropped below
  }
  std::erase_if(r, [](const auto& x) { return x.first > x.second; });
  std::sort(r.begin(), r.end());
  CodepointRanges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

CodepointRanges NegateRanges(const CodepointRanges& r) {
  CodepointRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : NormalizeRanges(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

int32_t Grammar::RuleId(const std::string& name) {
  int32_t id = FindRule(name);
  if (id >= 0) return id;
  rules_.push_back({name, Expr{}, false});
  return static_cast<int32_t>(rules_.size() - 1);
}

int32_t Grammar::NewRule(const std::string& hint) {
  std::string name = hint;
  for (int i = 1; FindRule(name) >= 0; ++i) name = hint + "-" + std::to_string(i);
  return RuleId(name);
}

void Grammar::Define(int32_t rule, Expr body) {
  auto& r = rules_[static_cast<size_t>(rule)];
  r.body = std::move(body);
  r.defined = true;
}

int32_t Grammar::FindRule(const std::string& name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

namespace {

void EncodeUtf8(uint32_t cp, int n, uint8_t* out) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

int Utf8Length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// Splits [lo, hi] until each piece encodes to a sequence of independent byte ranges.
void SplitRange(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not scalar values
    if (lo < 0xD800) SplitRange(lo, 0xD7FF, out);
    if (hi > 0xDFFF) SplitRange(0xE000, hi, out);
    return;
  }
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      SplitRange(lo, max, out);
      SplitRange(max + 1, hi, out);
      return;
    }
  }
  int n = Utf8Length(lo);
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitRange(lo, lo | m, out);
        SplitRange((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitRange(lo, (hi & ~m) - 1, out);
        SplitRange(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  EncodeUtf8(lo, n, a);
  EncodeUtf8(hi, n, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(const CodepointRanges& r) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  for (const auto& [lo, hi] : r) SplitRange(lo, hi, out);
  return out;
}

namespace {

// One element of a lowered sequence: a byte set, a token terminal or a rule reference.
struct Elem {
  int32_t byteset = -1;
  int32_t rule = -1;
  int32_t token = -1;
};

class Lowerer {
 public:
  explicit Lowerer(const Grammar& g) : g_(g) {}

  StatusOr<Program> Run() {
    for (size_t i = 0; i < g_.num_rules(); ++i) {
      if (!g_.IsDefined(static_cast<int32_t>(i)))
        return InvalidArgumentError("grammar rule '{}' is referenced but never defined",
                                    g_.name(static_cast<int32_t>(i)));
      p_.rules.push_back({g_.name(static_cast<int32_t>(i)), {}, false});
    }
    if (g_.root() < 0) return InvalidArgumentError("grammar has no root rule");
    p_.root = g_.root();
    for (size_t i = 0; i < g_.num_rules(); ++i)
      FERRY_RETURN_IF_ERROR(LowerRule(static_cast<int32_t>(i), g_.body(static_cast<int32_t>(i))));
    FERRY_RETURN_IF_ERROR(CheckLeftRecursion());
    return std::move(p_);
  }

 private:
  Status LowerRule(int32_t rule, const Expr& body) {
    std::vector<const Expr*> alts;
    if (body.kind == Expr::Kind::kAlt)
      for (const Expr& a : body.items) alts.push_back(&a);
    else
      alts.push_back(&body);
    for (const Expr* a : alts) {
      std::vector<Elem> seq;
      FERRY_RETURN_IF_ERROR(LowerInto(*a, seq));
      AddAlt(rule, seq);
    }
    return Status::Ok();
  }

  void AddAlt(int32_t rule, const std::vector<Elem>& seq) {
    int32_t first = -1;
    for (size_t i = 0; i < seq.size(); ++i) {
      int32_t id = static_cast<int32_t>(p_.positions.size());
      p_.positions.push_back({seq[i].byteset, seq[i].token, seq[i].rule, -1, rule});
      if (i == 0)
        first = id;
      else
        p_.positions[static_cast<size_t>(id - 1)].next = id;
    }
    p_.rules[static_cast<size_t>(rule)].alts.push_back(first);
  }

  int32_t Helper(const std::string& kind) {
    p_.rules.push_back({kind + "#" + std::to_string(p_.rules.size()), {}, true});
    return static_cast<int32_t>(p_.rules.size() - 1);
  }

  int32_t ByteSetId(const ByteSet& s) {
    auto [it, inserted] = byteset_ids_.try_emplace(s, static_cast<int32_t>(p_.bytesets.size()));
    if (inserted) p_.bytesets.push_back(s);
    return it->second;
  }

  int32_t ClassRule(const CodepointRanges& r) {
    auto it = class_rules_.find(r);
    if (it != class_rules_.end()) return it->second;
    int32_t rule = Helper("class");
    class_rules_[r] = rule;
    for (const auto& seq : Utf8Sequences(r)) {
      std::vector<Elem> elems;
      for (auto [lo, hi] : seq) {
        ByteSet s{};
        for (int b = lo; b <= hi; ++b) AddByte(s, static_cast<uint8_t>(b));
        elems.push_back({ByteSetId(s), -1});
      }
      AddAlt(rule, elems);
    }
    return rule;
  }

  int32_t TokenTerminalId(const Expr& e) {
    TokenTerminal t{e.rule, e.rule >= 0 ? std::string() : e.literal, e.min != 0};
    auto [it, inserted] = token_ids_.try_emplace(t, static_cast<int32_t>(p_.tokens.size()));
    if (inserted) p_.tokens.push_back(t);
    return it->second;
  }

  Status LowerInto(const Expr& e, std::vector<Elem>& seq) {
    switch (e.kind) {
      case Expr::Kind::kToken:
        if (e.rule < 0 && e.literal.empty()) return InvalidArgumentError("a token terminal names no token");
        seq.push_back({-1, -1, TokenTerminalId(e)});
        return Status::Ok();
      case Expr::Kind::kEmpty:
        return Status::Ok();
      case Expr::Kind::kLiteral:
        for (char c : e.literal) {
          ByteSet s{};
          AddByte(s, static_cast<uint8_t>(c));
          seq.push_back({ByteSetId(s), -1});
        }
        return Status::Ok();
      case Expr::Kind::kClass: {
        if (e.ranges.empty() || e.ranges.back().second < 0x80) {
          ByteSet s{};
          for (auto [lo, hi] : e.ranges)
            for (uint32_t c = lo; c <= hi; ++c) AddByte(s, static_cast<uint8_t>(c));
          seq.push_back({ByteSetId(s), -1});
        } else {
          seq.push_back({-1, ClassRule(e.ranges)});
        }
        return Status::Ok();
      }
      case Expr::Kind::kRef:
        if (e.rule < 0 || static_cast<size_t>(e.rule) >= g_.num_rules())
          return InternalError("bad rule reference");
        seq.push_back({-1, e.rule});
        return Status::Ok();
      case Expr::Kind::kSeq:
        for (const Expr& x : e.items) FERRY_RETURN_IF_ERROR(LowerInto(x, seq));
        return Status::Ok();
      case Expr::Kind::kAlt: {
        int32_t rule = Helper("group");
        for (const Expr& a : e.items) {
          std::vector<Elem> alt;
          FERRY_RETURN_IF_ERROR(LowerInto(a, alt));
          AddAlt(rule, alt);
        }
        seq.push_back({-1, rule});
        return Status::Ok();
      }
      case Expr::Kind::kRepeat:
        return LowerRepeat(e, seq);
    }
    return Status::Ok();
  }

  Status LowerRepeat(const Expr& e, std::vector<Elem>& seq) {
    if (e.min < 0 || (e.max >= 0 && e.max < e.min))
      return InvalidArgumentError("repeat {{{},{}}}: the bounds must satisfy 0 <= min <= max", e.min, e.max);
    if (e.min > kMaxRepeat || e.max > kMaxRepeat)
      return InvalidArgumentError("repeat count {} exceeds the limit {}", std::max(e.min, e.max), kMaxRepeat);
    std::vector<Elem> item;
    FERRY_RETURN_IF_ERROR(LowerInto(e.items[0], item));
    if (item.empty()) return Status::Ok();  // repeating nothing is nothing
    Elem unit = item[0];
    if (item.size() > 1) {  // one element per copy: the item becomes a rule
      unit = {-1, Helper("item")};
      AddAlt(unit.rule, item);
    }
    for (int32_t i = 0; i < e.min; ++i) seq.push_back(unit);
    if (e.max < 0) {
      int32_t star = Helper("star");
      AddAlt(star, {unit, {-1, star}});
      AddAlt(star, {});
      seq.push_back({-1, star});
    } else if (e.max > e.min) {
      // x{0,k} as x (x (x)?)? ...: nested, so each count has exactly one parse.
      int32_t inner = -1;
      for (int32_t i = 0; i < e.max - e.min; ++i) {
        int32_t opt = Helper("opt");
        if (inner < 0)
          AddAlt(opt, {unit});
        else
          AddAlt(opt, {unit, {-1, inner}});
        AddAlt(opt, {});
        inner = opt;
      }
      seq.push_back({-1, inner});
    }
    return Status::Ok();
  }

  Status CheckLeftRecursion() {
    size_t n = p_.rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (int32_t pos : p_.rules[r].alts) {
          bool all = true;
          for (; pos >= 0 && all; pos = p_.positions[static_cast<size_t>(pos)].next) {
            const auto& x = p_.positions[static_cast<size_t>(pos)];
            all = x.rule >= 0 && nullable[static_cast<size_t>(x.rule)];
          }
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Leftmost references: r can start with x. An edge is "growing" when the reference is
    // not the last element (the matcher pushes a return position before expanding x); a
    // cycle of tail references only revisits the same stacks and terminates, one with a
    // growing edge would expand forever.
    struct Edge {
      int32_t to;
      bool growing;
    };
    std::vector<std::vector<Edge>> left(n);
    for (size_t r = 0; r < n; ++r) {
      for (int32_t pos : p_.rules[r].alts) {
        for (; pos >= 0; pos = p_.positions[static_cast<size_t>(pos)].next) {
          const auto& x = p_.positions[static_cast<size_t>(pos)];
          if (x.rule < 0) break;
          left[r].push_back({x.rule, x.next >= 0});
          if (!nullable[static_cast<size_t>(x.rule)]) break;
        }
      }
    }
    std::vector<uint32_t> seen(n, 0);
    uint32_t stamp = 0;
    for (size_t r = 0; r < n; ++r) {
      for (const Edge& e : left[r]) {
        if (!e.growing) continue;
        // Is r reachable from e.to?
        ++stamp;
        std::vector<int32_t> todo{e.to};
        seen[static_cast<size_t>(e.to)] = stamp;
        while (!todo.empty()) {
          int32_t x = todo.back();
          todo.pop_back();
          if (static_cast<size_t>(x) == r)
            return InvalidArgumentError(
                "grammar rule '{}' is left-recursive (it can start with itself); rewrite it "
                "right-recursively",
                NamedRule(static_cast<int32_t>(r)));
          for (const Edge& f : left[static_cast<size_t>(x)]) {
            if (seen[static_cast<size_t>(f.to)] == stamp) continue;
            seen[static_cast<size_t>(f.to)] = stamp;
            todo.push_back(f.to);
          }
        }
      }
    }
    return Status::Ok();
  }

  // A helper's error names the user's rule it came from where possible.
  std::string NamedRule(int32_t r) const { return p_.rules[static_cast<size_t>(r)].name; }

  const Grammar& g_;
  Program p_;
  std::map<ByteSet, int32_t> byteset_ids_;
  std::map<CodepointRanges, int32_t> class_rules_;
  std::map<TokenTerminal, int32_t> token_ids_;
};

}  // namespace

StatusOr<Program> Lower(const Grammar& g) {
  return Lowerer(g).Run();
}

}  // namespace ferry::constraint
