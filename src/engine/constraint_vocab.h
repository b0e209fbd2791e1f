// The tokenizer's vocabulary as the constraint layer sees it: each token's output bytes
// (byte-fallback <0xNN> tokens give their byte, SentencePiece's '▁' a space), no bytes for
// control/unknown/unused tokens (control tokens keep their text, so a grammar's token
// terminal such as <|channel|> can name them), and the end-of-generation tokens.
#pragma once

#include <memory>

#include "constraint/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

std::shared_ptr<const constraint::TokenVocabulary> ConstraintVocabulary(const Tokenizer& tok);

}  // namespace ferry
