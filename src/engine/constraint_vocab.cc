#include "engine/constraint_vocab.h"

namespace ferry {

std::shared_ptr<const constraint::TokenVocabulary> ConstraintVocabulary(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.n_vocab()));
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.IsEog(id)) ends.push_back(id);
    TokenType t = tok.GetTokenType(id);
    if (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused) continue;
    bytes[static_cast<size_t>(id)] = tok.TokenToPiece(id);
  }
  return std::make_shared<const constraint::TokenVocabulary>(std::move(bytes), std::move(ends));
}

}  // namespace ferry
