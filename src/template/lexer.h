// Lexer: template source -> tokens, with Jinja2's whitespace rules as transformers configures
// them (trim_blocks, lstrip_blocks, `-`/`+` markers, comments, raw blocks, no trailing newline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::tmpl {

struct Token {
  enum class Type : uint8_t {
    kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd,
    kName, kString, kInt, kFloat, kOp, kEof,
  };
  Type type = Type::kEof;
  std::string text;  // text data, name, unescaped string literal or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws TemplateError (TemplateSyntaxError) on malformed input.
std::vector<Token> Lex(const std::string& source, const LexOptions& options = {});

}  // namespace ferry::tmpl
