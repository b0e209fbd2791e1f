#include "engine/constraint_vocab.h"

namespace ferry {

std::shared_ptr<const constraint::TokenVocabulary> ConstraintVocabulary(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.n_vocab()));
  std::vector<std::string> specials(bytes.size());  // control tokens: only a token terminal emits them
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.IsEog(id)) ends.push_back(id);
    TokenType t = tok.GetTokenType(id);
    if (t == TokenType::kUnknown || t == TokenType::kUnused) continue;
    if (t == TokenType::kControl)
      specials[static_cast<size_t>(id)] = tok.TokenToPiece(id, /*render_special=*/true);
    else
      bytes[static_cast<size_t>(id)] = tok.TokenToPiece(id);
  }
  return std::make_shared<const constraint::TokenVocabulary>(std::move(bytes), std::move(ends),
                                                             std::move(specials));
}

}  // namespace ferry
