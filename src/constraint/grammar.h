// Grammar: the one form every constraint front end (GBNF, regex, JSON Schema, choice lists)
// compiles into. Front ends build expression trees (Expr) per rule; Lower() flattens them into
// a Program of byte-level positions: each rule is a list of alternatives, each alternative a
// sequence of elements that are either a byte set (one input byte), a token terminal (one
// whole token, by id: GBNF's <[id]>, <text> and their negations) or a rule reference.
// Unicode character classes become helper rules over their UTF-8 byte sequences, repeats
// become right-recursive helper rules, so apart from token terminals the matcher only ever
// sees bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ferry::constraint {

// Inclusive code point ranges, sorted and disjoint.
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

struct Expr {
  enum class Kind { kEmpty, kLiteral, kClass, kRef, kSeq, kAlt, kRepeat, kToken };
  Kind kind = Kind::kEmpty;
  std::string literal;      // kLiteral: bytes; kToken: the token's text when rule < 0
  CodepointRanges ranges;   // kClass (empty = matches nothing)
  int32_t rule = -1;        // kRef; kToken: the token id (-1: looked up by its text)
  std::vector<Expr> items;  // kSeq, kAlt; kRepeat: exactly one
  int32_t min = 0;          // kRepeat; kToken: 1 = negated (any one token but this)
  int32_t max = -1;         // kRepeat, -1 = unbounded

  static Expr Empty() { return Expr{}; }
  static Expr Literal(std::string bytes);
  static Expr Class(CodepointRanges ranges);  // normalizes (sorts, merges)
  static Expr Char(uint32_t cp) { return Class({{cp, cp}}); }
  static Expr Ref(int32_t rule);
  static Expr Seq(std::vector<Expr> items);
  static Expr Alt(std::vector<Expr> items);
  static Expr Repeat(Expr item, int32_t min, int32_t max);
  static Expr TokenId(int32_t id, bool negated);
  static Expr TokenText(std::string text, bool negated);
  static Expr Optional(Expr item) { return Repeat(std::move(item), 0, 1); }
  static Expr Star(Expr item) { return Repeat(std::move(item), 0, -1); }
};

// Sorted, merged ranges; Negate() over [0, 0x10FFFF].
CodepointRanges NormalizeRanges(CodepointRanges r);
CodepointRanges NegateRanges(const CodepointRanges& r);

// Rules by name; the root is the start symbol. A rule may be referenced before it is defined
// (GBNF, $ref); Lower() reports any left undefined.
class Grammar {
 public:
  // Id of the rule `name`, declaring it (undefined) if new.
  int32_t RuleId(const std::string& name);
  // A fresh rule with a unique name derived from `hint`.
  int32_t NewRule(const std::string& hint);
  // Defines (or redefines) a rule's body.
  void Define(int32_t rule, Expr body);
  bool IsDefined(int32_t rule) const { return rules_[static_cast<size_t>(rule)].defined; }
  int32_t FindRule(const std::string& name) const;  // -1 if absent
  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }
  size_t num_rules() const { return rules_.size(); }
  const std::string& name(int32_t rule) const { return rules_[static_cast<size_t>(rule)].name; }
  const Expr& body(int32_t rule) const { return rules_[static_cast<size_t>(rule)].body; }

 private:
  struct Rule {
    std::string name;
    Expr body;
    bool defined = false;
  };
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

using ByteSet = std::array<uint64_t, 4>;
inline bool HasByte(const ByteSet& s, uint8_t b) {
  return (s[b >> 6] >> (b & 63)) & 1;
}
inline void AddByte(ByteSet& s, uint8_t b) {
  s[b >> 6] |= uint64_t{1} << (b & 63);
}

// A terminal that consumes one whole token. Front ends may name the token by its text; the
// vocabulary binding (BindTokenTerminals) turns that into its id.
struct TokenTerminal {
  int32_t id = -1;
  std::string text;  // as written, for lookup and error messages
  bool negated = false;
  bool operator<(const TokenTerminal& o) const {
    return std::tie(id, text, negated) < std::tie(o.id, o.text, o.negated);
  }
};

// The flattened grammar the matcher runs.
struct Program {
  struct Position {
    int32_t byteset = -1;  // >= 0: a terminal over bytesets[byteset]
    int32_t token = -1;    // >= 0: a terminal over one whole token, tokens[token]
    int32_t rule = -1;     // else: a reference to this rule
    int32_t next = -1;     // the next position in the alternative, -1 at its end
    int32_t owner = -1;    // the rule this position belongs to
  };
  struct Rule {
    std::string name;
    std::vector<int32_t> alts;  // first position of each alternative, -1 = empty alternative
    // Helper rules (repeats, groups, character classes) are folded into their parent's
    // context when the mask cache keys a state; named rules bound a key.
    bool helper = false;
  };
  std::vector<Position> positions;
  std::vector<ByteSet> bytesets;
  std::vector<TokenTerminal> tokens;
  std::vector<Rule> rules;
  int32_t root = -1;
};

// Flattens, checks every rule is defined and that no rule is left-recursive (the matcher
// expands leftmost references eagerly). Errors name the rule.
StatusOr<Program> Lower(const Grammar& g);

// Code point ranges as UTF-8 byte-range sequences (surrogates excluded): each inner vector
// holds the inclusive [lo, hi] of each byte.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(const CodepointRanges& r);

}  // namespace ferry::constraint
