// Lexer: mirrors jinja2/lexer.py's root/block/variable/comment/raw states.
#include "template/lexer.h"

#include <cstring>

#include "base/utf8.h"
#include "template/error.h"

namespace ferry::tmpl {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Jinja normalizes \r\n and \r to \n and drops one trailing newline.
std::string Normalize(const std::string& in, bool keep_trailing_newline) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out += in[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& opt) : src_(std::move(src)), opt_(opt) {}

  std::vector<Token> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t idx = FindTagStart(pos_);
      if (idx == std::string::npos) {
        Emit(Token::Type::kText, src_.substr(pos_));
        pos_ = src_.size();
        break;
      }
      char kind = src_[idx + 1];  // '{', '%' or '#'
      char sign = idx + 2 < src_.size() ? src_[idx + 2] : '\0';
      bool is_raw = kind == '%' && IsRawBegin(idx);
      std::string text = src_.substr(pos_, idx - pos_);
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && IsSpace(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
          bool all_ws = true;
          for (size_t i = l_pos; i < text.size(); ++i) all_ws = all_ws && IsSpace(text[i]);
          if (all_ws) text.resize(l_pos);
        }
      }
      CountLines(pos_, idx);
      if (!text.empty()) Emit(Token::Type::kText, text);
      pos_ = idx + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        LexComment();
      } else if (is_raw) {
        LexRaw();
      } else {
        LexTag(kind == '{');
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    Emit(Token::Type::kEof, "");
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void CountLines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  void Emit(Token::Type type, std::string text) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  [[noreturn]] void Fail(const std::string& what) {
    throw TemplateError("TemplateSyntaxError", what + " (line " + std::to_string(line_) + ")");
  }

  // `{% raw %}` (any whitespace control) at idx?
  bool IsRawBegin(size_t idx) const {
    size_t p = idx + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  // After "#}": `-#}` strips following whitespace, plain `#}` trims one newline.
  void ConsumeTagEnd(size_t end_pos, size_t marker_len, bool minus, bool plus) {
    CountLines(pos_, end_pos + marker_len);
    pos_ = end_pos + marker_len;
    if (minus) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
    } else if (!plus && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  void LexComment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) Fail("Missing end of comment tag");
    bool minus = end > pos_ && src_[end - 1] == '-';
    bool plus = end > pos_ && src_[end - 1] == '+';
    ConsumeTagEnd(end, 2, minus, plus);
  }

  void LexRaw() {
    // Skip "raw" and the tag end; `{% raw %}` itself never trims the newline after it.
    while (IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
    pos_ += 3;
    while (IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
    if (src_[pos_] == '-') {
      pos_ += 3;
      while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
    } else {
      pos_ += 2;
    }
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t p = i + 2;
      char sign = p < src_.size() ? src_[p] : '\0';
      if (sign == '-' || sign == '+') ++p;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      bool minus = src_.compare(p, 3, "-%}") == 0, plus = src_.compare(p, 3, "+%}") == 0;
      if (!minus && !plus && src_.compare(p, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, i - pos_);
      if (sign == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (sign != '+' && opt_.lstrip_blocks) {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        bool all_ws = l_pos < text.size();
        for (size_t k = l_pos; k < text.size(); ++k) all_ws = all_ws && IsSpace(text[k]);
        if (all_ws && l_pos > 0) text.resize(l_pos);
      }
      if (!text.empty()) Emit(Token::Type::kText, text);
      ConsumeTagEnd(p, (minus || plus) ? 3 : 2, minus, plus);
      return;
    }
    Fail("Missing end of raw directive");
  }

  // Inside {{ }} or {% %}: expression tokens until the matching end at bracket depth 0.
  void LexTag(bool is_var) {
    Emit(is_var ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "");
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) Fail(is_var ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      const char end_char = is_var ? '}' : '%';
      if (depth == 0) {
        bool minus = src_[pos_] == '-' && src_.compare(pos_ + 1, 2, is_var ? "}}" : "%}") == 0;
        bool plus = !is_var && src_[pos_] == '+' && src_.compare(pos_ + 1, 2, "%}") == 0;
        bool plain = src_[pos_] == end_char && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}';
        if (minus || plus || plain) {
          Emit(is_var ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "");
          size_t len = (minus || plus) ? 3 : 2;
          if (is_var) {
            pos_ += len;
            if (minus)
              while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
          } else {
            ConsumeTagEnd(pos_, len, minus, plus);
          }
          return;
        }
      }
      char c = src_[pos_];
      if (IsNameStart(c)) {
        size_t s = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        Emit(Token::Type::kName, src_.substr(s, pos_ - s));
      } else if (IsDigit(c)) {
        LexNumber();
      } else if (c == '\'' || c == '"') {
        LexString(c);
      } else {
        static const char* kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* o : kOps2)
          if (src_.compare(pos_, 2, o) == 0) op = o;
        if (op.empty()) {
          if (!std::strchr("+-/*%~[](){}<>=.:|,;!", c)) Fail(std::string("unexpected char '") + c + "'");
          if (c == '!') Fail("unexpected char '!'");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) Fail("unexpected '" + op + "'");
          --depth;
        }
        pos_ += op.size();
        Emit(Token::Type::kOp, op);
      }
    }
  }

  void LexNumber() {
    size_t s = pos_;
    bool after_dot = s > 0 && src_[s - 1] == '.';
    auto digits = [&] {
      while (pos_ < src_.size() && (IsDigit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && IsDigit(src_[pos_ + 1])))) ++pos_;
    };
    digits();
    bool is_float = false;
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && IsDigit(src_[p])) {
        pos_ = p;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = s; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t;
    t.line = line_;
    t.text = text;
    if (is_float) {
      t.type = Token::Type::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = Token::Type::kInt;
      int64_t v = 0;
      for (char ch : text) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, ch - '0', &v))
          throw TemplateError("Unsupported", "integer literal too large: " + text, StatusCode::kUnsupported);
      }
      t.int_value = v;
    }
    tokens_.push_back(std::move(t));
  }

  // Python string literal escapes (jinja2 decodes with "unicode-escape").
  void LexString(char quote) {
    int start_line = line_;
    ++pos_;
    std::string out;
    for (;;) {
      if (pos_ >= src_.size()) Fail("unexpected end of string");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) Fail("unexpected end of string");
      char e = src_[pos_++];
      auto hex = [&](int n) -> uint32_t {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
          if (pos_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos_]))) Fail("truncated \\x/\\u escape in string");
          char h = src_[pos_++];
          v = v * 16 + static_cast<uint32_t>(IsDigit(h) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': ++line_; break;
        case 'x': utf8::AppendCodepoint(out, hex(2)); break;
        case 'u': utf8::AppendCodepoint(out, hex(4)); break;
        case 'U': {
          uint32_t cp = hex(8);
          if (cp > 0x10FFFF) Fail("illegal Unicode character in string");
          utf8::AppendCodepoint(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i)
              v = v * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            utf8::AppendCodepoint(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    Token t;
    t.type = Token::Type::kString;
    t.text = std::move(out);
    t.line = start_line;
    tokens_.push_back(std::move(t));
  }

  std::string src_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Lex(const std::string& source, const LexOptions& options) {
  return Lexer(Normalize(source, options.keep_trailing_newline), options).Run();
}

}  // namespace ferry::tmpl
