#include "constraint/regex_compiler.h"

#include <cctype>

#include "base/utf8.h"

namespace ferry::constraint {

Expr JsonStringClass(const CodepointRanges& ranges) {
  // Raw: everything but the quote, the backslash and C0 controls.
  CodepointRanges raw_allowed = NegateRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  CodepointRanges raw;
  for (auto [lo, hi] : NormalizeRanges(ranges))
    for (auto [alo, ahi] : raw_allowed)
      if (std::max(lo, alo) <= std::min(hi, ahi)) raw.push_back({std::max(lo, alo), std::min(hi, ahi)});
  std::vector<Expr> alts;
  if (!raw.empty()) alts.push_back(Expr::Class(raw));
  auto contains = [&](uint32_t c) {
    for (auto [lo, hi] : ranges)
      if (lo <= c && c <= hi) return true;
    return false;
  };
  static constexpr char kHex[] = "0123456789abcdef";
  for (uint32_t c : {uint32_t{'"'}, uint32_t{'\\'}})
    if (contains(c)) alts.push_back(Expr::Literal(std::string("\\") + static_cast<char>(c)));
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!contains(c)) continue;
    switch (c) {
      case '\n':
        alts.push_back(Expr::Literal("\\n"));
        break;
      case '\t':
        alts.push_back(Expr::Literal("\\t"));
        break;
      case '\r':
        alts.push_back(Expr::Literal("\\r"));
        break;
      case '\b':
        alts.push_back(Expr::Literal("\\b"));
        break;
      case '\f':
        alts.push_back(Expr::Literal("\\f"));
        break;
      default:
        alts.push_back(Expr::Literal(std::string("\\u00") + kHex[c >> 4] + kHex[c & 15]));
    }
  }
  if (alts.empty()) return Expr::Class({});
  return Expr::Alt(std::move(alts));
}

namespace {

constexpr int kMaxNesting = 200;

CodepointRanges Digits() {
  return {{'0', '9'}};
}
CodepointRanges Word() {
  return NormalizeRanges({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
}
CodepointRanges Space() {
  return NormalizeRanges({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}});
}

class RegexParser {
 public:
  RegexParser(std::string_view s, const RegexOptions& o) : s_(s), o_(o) {}

  StatusOr<Expr> Run() {
    bool start_anchor = Peek() == '^';
    if (start_anchor) ++pos_;
    Expr body;
    FERRY_RETURN_IF_ERROR(ParseAlt(0, body));
    bool end_anchor = false;
    if (Peek() == '$') {
      ++pos_;
      end_anchor = true;
    }
    if (pos_ < s_.size()) {
      if (Peek() == ')') return Error("unbalanced ')'");
      return Error("'$' is only supported at the end of the pattern");
    }
    if (!o_.search) return body;
    std::vector<Expr> seq;
    Expr any = Char(NegateRanges({}));
    if (!start_anchor) seq.push_back(Expr::Star(any));
    seq.push_back(std::move(body));
    if (!end_anchor) seq.push_back(Expr::Star(any));
    return Expr::Seq(std::move(seq));
  }

 private:
  Status Error(std::string_view what) const {
    return InvalidArgumentError("regex '{}', at offset {}: {}", s_, pos_, what);
  }
  char Peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool AtEnd() const { return pos_ >= s_.size(); }

  Expr Char(const CodepointRanges& r) const { return o_.json_string ? JsonStringClass(r) : Expr::Class(r); }

  Status ParseAlt(int depth, Expr& out) {
    if (depth > kMaxNesting) return Error("groups nested too deeply");
    std::vector<Expr> alts;
    while (true) {
      Expr seq;
      FERRY_RETURN_IF_ERROR(ParseSeq(depth, seq));
      alts.push_back(std::move(seq));
      if (Peek() != '|') break;
      ++pos_;
    }
    out = Expr::Alt(std::move(alts));
    return Status::Ok();
  }

  Status ParseSeq(int depth, Expr& out) {
    std::vector<Expr> items;
    while (!AtEnd()) {
      char c = Peek();
      if (c == '|' || c == ')') break;
      if (c == '$' && pos_ + 1 == s_.size()) break;
      Expr atom;
      FERRY_RETURN_IF_ERROR(ParseAtom(depth, atom));
      FERRY_RETURN_IF_ERROR(ParseQuantifiers(atom));
      items.push_back(std::move(atom));
    }
    out = items.empty() ? Expr::Empty() : Expr::Seq(std::move(items));
    return Status::Ok();
  }

  Status ParseQuantifiers(Expr& atom) {
    while (!AtEnd()) {
      char c = Peek();
      int32_t min = 0, max = -1;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{' && std::isdigit(static_cast<unsigned char>(Peek(1)))) {
        ++pos_;
        FERRY_RETURN_IF_ERROR(ParseInt(&min));
        max = min;
        if (Peek() == ',') {
          ++pos_;
          max = -1;
          if (Peek() != '}') FERRY_RETURN_IF_ERROR(ParseInt(&max));
        }
        if (Peek() != '}') return Error("expected '}' closing the repeat count");
        ++pos_;
        if (max >= 0 && max < min) return Error("repeat {n,m} needs n <= m");
      } else {
        return Status::Ok();
      }
      if (Peek() == '?')
        ++pos_;  // lazy: the same language
      else if (Peek() == '+')
        return Error("possessive quantifiers are not supported");
      atom = Expr::Repeat(std::move(atom), min, max);
    }
    return Status::Ok();
  }

  Status ParseInt(int32_t* v) {
    int64_t n = 0;
    if (!std::isdigit(static_cast<unsigned char>(Peek()))) return Error("expected a number");
    while (std::isdigit(static_cast<unsigned char>(Peek()))) {
      n = n * 10 + (Peek() - '0');
      if (n > 100000) return Error("repeat count too large");
      ++pos_;
    }
    *v = static_cast<int32_t>(n);
    return Status::Ok();
  }

  Status ParseAtom(int depth, Expr& out) {
    char c = Peek();
    if (c == '(') {
      ++pos_;
      if (Peek() == '?') {
        if (Peek(1) == ':') {
          pos_ += 2;
        } else if (Peek(1) == '<' && Peek(2) != '=' && Peek(2) != '!') {
          size_t close = s_.find('>', pos_);
          if (close == std::string_view::npos) return Error("unterminated group name");
          pos_ = close + 1;
        } else if (Peek(1) == 'P' && Peek(2) == '<') {
          size_t close = s_.find('>', pos_);
          if (close == std::string_view::npos) return Error("unterminated group name");
          pos_ = close + 1;
        } else {
          return Error("lookaround and inline flags ((?=, (?!, (?<=, (?<!, (?i)...) are not supported");
        }
      }
      FERRY_RETURN_IF_ERROR(ParseAlt(depth + 1, out));
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      return Status::Ok();
    }
    if (c == '[') return ParseClass(out);
    if (c == '.') {
      ++pos_;
      out = Char(NegateRanges({{'\n', '\n'}}));
      return Status::Ok();
    }
    if (c == '^') return Error("'^' is only supported at the start of the pattern");
    if (c == '$') return Error("'$' is only supported at the end of the pattern");
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    if (c == '{' && std::isdigit(static_cast<unsigned char>(Peek(1)))) return Error("nothing to repeat");
    CodepointRanges r;
    FERRY_RETURN_IF_ERROR(ParseCharOrEscape(false, r));
    out = Char(r);
    return Status::Ok();
  }

  // One character (or a \d-style class) outside or inside [...].
  Status ParseCharOrEscape(bool in_class, CodepointRanges& r) {
    if (Peek() != '\\') {
      uint32_t cp;
      if (!utf8::DecodeCodepoint(s_, &pos_, &cp)) return Error("invalid UTF-8");
      r = {{cp, cp}};
      return Status::Ok();
    }
    ++pos_;
    if (AtEnd()) return Error("trailing backslash");
    char e = Peek();
    ++pos_;
    switch (e) {
      case 'd':
        r = Digits();
        return Status::Ok();
      case 'D':
        r = NegateRanges(Digits());
        return Status::Ok();
      case 'w':
        r = Word();
        return Status::Ok();
      case 'W':
        r = NegateRanges(Word());
        return Status::Ok();
      case 's':
        r = Space();
        return Status::Ok();
      case 'S':
        r = NegateRanges(Space());
        return Status::Ok();
      case 'n':
        r = {{'\n', '\n'}};
        return Status::Ok();
      case 't':
        r = {{'\t', '\t'}};
        return Status::Ok();
      case 'r':
        r = {{'\r', '\r'}};
        return Status::Ok();
      case 'f':
        r = {{'\f', '\f'}};
        return Status::Ok();
      case 'v':
        r = {{'\v', '\v'}};
        return Status::Ok();
      case '0':
        r = {{0, 0}};
        return Status::Ok();
      case 'x':
      case 'u': {
        int digits = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          char h = Peek();
          if (!std::isxdigit(static_cast<unsigned char>(h))) return Error("expected a hex digit");
          v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                 ? h - '0'
                                                 : std::tolower(h) - 'a' + 10);
          ++pos_;
        }
        r = {{v, v}};
        return Status::Ok();
      }
      case 'b':
        if (in_class) {
          r = {{'\b', '\b'}};
          return Status::Ok();
        }
        return Error("word boundaries (\\b) are not supported");
      case 'B':
        return Error("word boundaries (\\B) are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(e))) return Error("backreferences are not supported");
        if (std::isalpha(static_cast<unsigned char>(e)))
          return Error(std::string("unknown escape '\\") + e + "'");
        r = {{static_cast<uint8_t>(e), static_cast<uint8_t>(e)}};
        return Status::Ok();
    }
  }

  Status ParseClass(Expr& out) {
    ++pos_;
    bool negate = Peek() == '^';
    if (negate) ++pos_;
    CodepointRanges ranges;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      if (Peek() == ']' && !first) break;
      first = false;
      CodepointRanges lo;
      FERRY_RETURN_IF_ERROR(ParseCharOrEscape(true, lo));
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0' && lo.size() == 1 &&
          lo[0].first == lo[0].second) {
        ++pos_;
        CodepointRanges hi;
        FERRY_RETURN_IF_ERROR(ParseCharOrEscape(true, hi));
        if (hi.size() != 1 || hi[0].first != hi[0].second) return Error("a class escape cannot end a range");
        if (hi[0].first < lo[0].first) return Error("character range is reversed");
        ranges.push_back({lo[0].first, hi[0].first});
      } else {
        ranges.insert(ranges.end(), lo.begin(), lo.end());
      }
    }
    ++pos_;
    ranges = NormalizeRanges(ranges);
    out = Char(negate ? NegateRanges(ranges) : ranges);
    return Status::Ok();
  }

  std::string_view s_;
  RegexOptions o_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<Expr> CompileRegex(std::string_view pattern, const RegexOptions& options) {
  return RegexParser(pattern, options).Run();
}

StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  FERRY_ASSIGN_OR_RETURN(Expr e, CompileRegex(pattern));
  Grammar g;
  int32_t root = g.RuleId("root");
  g.Define(root, std::move(e));
  g.set_root(root);
  return g;
}

}  // namespace ferry::constraint
