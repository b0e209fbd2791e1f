// Regular expressions (the ECMA-262 / Python subset JSON Schema `pattern` and vLLM's
// guided_regex use) into grammar expressions: literals and escapes (\d \w \s \D \W \S \n \t
// \r \f \v \xHH \uHHHH, escaped metacharacters), classes with ranges and negation, `.`,
// groups ((...), (?:...), (?<name>...)), alternation, * + ? {n} {n,} {n,m} (lazy forms match
// the same strings), ^ at the start and $ at the end. Backreferences, lookaround, word
// boundaries and inner anchors are errors naming the construct.
#pragma once

#include <string_view>

#include "base/status.h"
#include "constraint/grammar.h"

namespace ferry::constraint {

struct RegexOptions {
  // The pattern describes a JSON string's decoded content: characters that JSON must escape
  // (", \, control characters) are emitted as their escapes.
  bool json_string = false;
  // Unanchored search (JSON Schema `pattern`): without a leading ^ / trailing $ any text may
  // come before / after the match.
  bool search = false;
};

StatusOr<Expr> CompileRegex(std::string_view pattern, const RegexOptions& options = {});
// A grammar whose language is the full-match language of the pattern.
StatusOr<Grammar> RegexGrammar(std::string_view pattern);
// A code point class as grammar text of a JSON string (escaping what JSON requires).
Expr JsonStringClass(const CodepointRanges& ranges);

}  // namespace ferry::constraint
