// TokenizerImpl: the interface each tokenizer kind implements behind Tokenizer (SPM "llama",
// byte-level BPE "gpt2", WordPiece "bert"), plus the factory for each kind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"
#include "tokenizer/vocab.h"

namespace ferry {

class TokenizerImpl {
 public:
  virtual ~TokenizerImpl() = default;
  TokenizerImpl(const TokenizerImpl&) = delete;
  TokenizerImpl& operator=(const TokenizerImpl&) = delete;

  const Vocab& vocab() const { return vocab_; }
  const std::string& model_name() const { return model_name_; }

  // Whole-text encoding, special tokens and BOS/EOS included (Tokenizer::Encode's contract).
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // `id` is in range (the caller checks). Control and unknown tokens render only on request,
  // user-defined ones as their text, unused ones as nothing, whatever the tokenizer kind;
  // normal and byte tokens are the kind's business.
  std::string TokenToPiece(int32_t id, bool render_special) const {
    const TokenData& t = vocab_.token(id);
    switch (t.type) {
      case TokenType::kControl:
      case TokenType::kUnknown:
        return render_special ? t.text : std::string();
      case TokenType::kUserDefined:
        return t.text;
      case TokenType::kNormal:
      case TokenType::kByte:
        return TextPiece(id, t);
      case TokenType::kUnused:
      case TokenType::kUndefined:
        return std::string();
    }
    return std::string();
  }

 protected:
  // The output bytes of a normal or byte token.
  virtual std::string TextPiece(int32_t id, const TokenData& t) const = 0;

  TokenizerImpl(Vocab vocab, std::string model_name)
      : vocab_(std::move(vocab)), model_name_(std::move(model_name)) {}

  Vocab vocab_;
  std::string model_name_;
};

// tokenizer.ggml.model == "llama": SentencePiece BPE with scores and byte fallback.
StatusOr<std::unique_ptr<TokenizerImpl>> CreateSpmTokenizer(const Metadata& md);
// tokenizer.ggml.model == "gpt2": byte-level BPE with merges and a pre-tokenizer (bpe.cc).
StatusOr<std::unique_ptr<TokenizerImpl>> CreateBpeTokenizer(const Metadata& md);
// tokenizer.ggml.model == "bert": WordPiece (wordpiece.cc).
StatusOr<std::unique_ptr<TokenizerImpl>> CreateWordPieceTokenizer(const Metadata& md);

}  // namespace ferry
