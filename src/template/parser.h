// Parser: tokens -> statement tree, following jinja2/parser.py's grammar and precedence.
#pragma once

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace ferry::tmpl {

// Throws TemplateError: TemplateSyntaxError for malformed templates, Unsupported (naming the
// construct) for valid Jinja this renderer does not implement (include, extends, ...).
Body Parse(const std::vector<Token>& tokens);

// Deepest nesting of brackets, unary operators or blocks the parser accepts (keeps the
// recursive descent and the interpreter's recursion far inside the stack).
inline constexpr int kMaxParseDepth = 64;

}  // namespace ferry::tmpl
