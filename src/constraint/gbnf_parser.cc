#include "constraint/gbnf_parser.h"

#include <cctype>
#include <cstdint>

#include "base/utf8.h"

namespace ferry::constraint {
namespace {

constexpr int kMaxNesting = 200;  // groups inside groups: bounds the recursion on hostile input

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  StatusOr<Grammar> Run() {
    SkipSpace(true);
    while (pos_ < s_.size()) {
      FERRY_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    int32_t root = g_.FindRule("root");
    if (root < 0) return InvalidArgumentError("GBNF grammar has no 'root' rule (the start symbol)");
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  Status Error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError("GBNF grammar, line {} column {}: {}", line, col, what);
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  static bool IsWordChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  }

  // Spaces and # comments; newlines too when `newlines` (inside groups, between rules).
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      char c = Peek();
      if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    size_t start = pos_;
    while (!AtEnd() && IsWordChar(Peek())) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  Status ParseRule() {
    std::string name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace(false);
    if (s_.substr(pos_, 3) != "::=") return Error("expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    SkipSpace(true);
    Expr body;
    FERRY_RETURN_IF_ERROR(ParseAlternatives(false, 0, body));
    int32_t id = g_.RuleId(name);
    if (g_.IsDefined(id)) return Error("rule '" + name + "' is defined twice");
    g_.Define(id, std::move(body));
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r')
      return Error("expected a newline or the end after the rule");
    return Status::Ok();
  }

  Status ParseAlternatives(bool nested, int depth, Expr& out) {
    std::vector<Expr> alts;
    while (true) {
      Expr seq;
      FERRY_RETURN_IF_ERROR(ParseSequence(nested, depth, seq));
      alts.push_back(std::move(seq));
      if (Peek() != '|') break;
      ++pos_;
      SkipSpace(true);
    }
    out = Expr::Alt(std::move(alts));
    return Status::Ok();
  }

  Status ParseEscape(uint32_t* cp) {
    ++pos_;  // the backslash
    if (AtEnd()) return Error("unfinished escape at the end");
    char c = Peek();
    ++pos_;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        char h = Peek();
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          return Error("expected a hex digit in the \\" + std::string(1, c) + " escape");
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                               ? h - '0'
                                               : (std::tolower(h) - 'a' + 10));
        ++pos_;
      }
      if (v > 0x10FFFF) return Error("escape beyond U+10FFFF");
      *cp = v;
      return Status::Ok();
    }
    switch (c) {
      case 't':
        *cp = '\t';
        return Status::Ok();
      case 'r':
        *cp = '\r';
        return Status::Ok();
      case 'n':
        *cp = '\n';
        return Status::Ok();
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        *cp = static_cast<uint8_t>(c);
        return Status::Ok();
      default:
        return Error(std::string("unknown escape '\\") + c + "'");
    }
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  Status ParseChar(uint32_t* cp) {
    if (Peek() == '\\') return ParseEscape(cp);
    if (!utf8::DecodeCodepoint(s_, &pos_, cp)) return Error("invalid UTF-8");
    return Status::Ok();
  }

  Status ParseSequence(bool nested, int depth, Expr& out) {
    std::vector<Expr> items;
    while (!AtEnd()) {
      char c = Peek();
      Expr item;
      if (c == '"') {
        ++pos_;
        std::string bytes;
        while (true) {
          if (AtEnd() || Peek() == '\n') return Error("unterminated string literal");
          if (Peek() == '"') break;
          uint32_t cp;
          FERRY_RETURN_IF_ERROR(ParseChar(&cp));
          utf8::AppendCodepoint(bytes, cp);
        }
        ++pos_;
        item = Expr::Literal(std::move(bytes));
      } else if (c == '[') {
        ++pos_;
        bool negate = Peek() == '^';
        if (negate) ++pos_;
        CodepointRanges ranges;
        while (true) {
          if (AtEnd()) return Error("unterminated character class");
          if (Peek() == ']') break;
          uint32_t lo, hi;
          FERRY_RETURN_IF_ERROR(ParseChar(&lo));
          hi = lo;
          if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
            ++pos_;
            FERRY_RETURN_IF_ERROR(ParseChar(&hi));
            if (hi < lo) return Error("character range is reversed");
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        item = Expr::Class(negate ? NegateRanges(ranges) : ranges);
      } else if (c == '.') {
        ++pos_;
        item = Expr::Class({{0, 0x10FFFF}});
      } else if (c == '(') {
        if (depth >= kMaxNesting) return Error("groups nested too deeply");
        ++pos_;
        SkipSpace(true);
        FERRY_RETURN_IF_ERROR(ParseAlternatives(true, depth + 1, item));
        if (Peek() != ')') return Error("expected ')'");
        ++pos_;
      } else if (c == '<' || (c == '!' && Peek(1) == '<')) {
        FERRY_RETURN_IF_ERROR(ParseToken(item));
      } else if (IsWordChar(c)) {
        std::string name = ParseName();
        // A name followed by ::= starts the next rule: the sequence (on its own line) ends here.
        size_t save = pos_;
        SkipSpace(false);
        if (s_.substr(pos_, 3) == "::=") return Error("expected a newline before the rule '" + name + "'");
        pos_ = save;
        item = Expr::Ref(g_.RuleId(name));
      } else {
        break;
      }
      SkipSpace(nested);
      // Postfix repeats apply to the item just parsed.
      while (!AtEnd()) {
        char r = Peek();
        int32_t min = 0, max = -1;
        if (r == '*') {
          ++pos_;
        } else if (r == '+') {
          ++pos_;
          min = 1;
        } else if (r == '?') {
          ++pos_;
          max = 1;
        } else if (r == '{') {
          ++pos_;
          SkipSpace(nested);
          FERRY_RETURN_IF_ERROR(ParseCount(&min, 0));
          SkipSpace(nested);
          if (Peek() == ',') {
            ++pos_;
            SkipSpace(nested);
            if (Peek() == '}') {
              max = -1;
            } else {
              FERRY_RETURN_IF_ERROR(ParseCount(&max, -1));
            }
          } else {
            max = min;
          }
          SkipSpace(nested);
          if (Peek() != '}') return Error("expected '}' closing the repeat count");
          ++pos_;
        } else {
          break;
        }
        if (max >= 0 && max < min) return Error("repeat {m,n} needs m <= n");
        item = Expr::Repeat(std::move(item), min, max);
        SkipSpace(nested);
      }
      items.push_back(std::move(item));
    }
    out = items.empty() ? Expr::Empty() : Expr::Seq(std::move(items));
    return Status::Ok();
  }

  // A token terminal, as llama.cpp writes them: <[id]> by id, <text> by the token's exact
  // text (e.g. <think>, <|im_end|>), either negated with a leading ! (any one token but it).
  Status ParseToken(Expr& out) {
    const bool negated = Peek() == '!';
    if (negated) ++pos_;
    const size_t start = pos_;
    ++pos_;  // '<'
    if (Peek() == '[') {
      ++pos_;
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) return Error("expected a token id after '<['");
      int64_t id = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        id = id * 10 + (Peek() - '0');
        if (id > INT32_MAX) return Error("token id too large");
        ++pos_;
      }
      if (Peek() != ']' || Peek(1) != '>') return Error("expected ']>' closing the token id");
      pos_ += 2;
      out = Expr::TokenId(static_cast<int32_t>(id), negated);
      return Status::Ok();
    }
    while (!AtEnd() && Peek() != '>' && Peek() != '\n') ++pos_;
    if (Peek() != '>') return Error("unterminated token '<...>'");
    ++pos_;
    std::string text(s_.substr(start, pos_ - start));
    if (text.size() == 2) return Error("empty token '<>'");
    out = Expr::TokenText(std::move(text), negated);
    return Status::Ok();
  }

  // A decimal count; `empty` is taken when no digit follows (as in {,n}).
  Status ParseCount(int32_t* v, int32_t empty) {
    if (!std::isdigit(static_cast<unsigned char>(Peek()))) {
      if (empty >= 0) {
        *v = empty;
        return Status::Ok();
      }
      return Error("expected a repeat count");
    }
    int64_t n = 0;
    while (std::isdigit(static_cast<unsigned char>(Peek()))) {
      n = n * 10 + (Peek() - '0');
      if (n > 1000000) return Error("repeat count too large");
      ++pos_;
    }
    *v = static_cast<int32_t>(n);
    return Status::Ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
  Grammar g_;
};

}  // namespace

StatusOr<Grammar> ParseGbnf(std::string_view text) {
  return GbnfParser(text).Run();
}

}  // namespace ferry::constraint
