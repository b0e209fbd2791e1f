// llama.cpp's GBNF grammar syntax (grammars/README.md there), so users' .gbnf files work:
// `name ::= alternatives` rules with "literals", [character classes] (^, ranges, \x \u \U
// escapes), `.`, (groups), rule references, `*` `+` `?` `{m}` `{m,}` `{m,n}` and # comments;
// the start symbol is `root`. Token references (<...>) are not supported (an error says so).
#pragma once

#include <string_view>

#include "base/status.h"
#include "constraint/grammar.h"

namespace ferry::constraint {

// Errors give the line and column and what was expected there.
StatusOr<Grammar> ParseGbnf(std::string_view text);

}  // namespace ferry::constraint
