// TokenizerImpl: the interface each tokenizer kind implements behind Tokenizer (SPM "llama",
// byte-level BPE "gpt2", WordPiece "bert"), plus the factory for each kind.
#pragma once

#include <atomic>
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
  // `id` is in range (the caller checks).
  virtual std::string TokenToPiece(int32_t id, bool render_special) const = 0;

 protected:
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

namespace tokenizer_internal {
// Tests only: encode each SPM fragment with one queue, exactly as llama.cpp does, to check that
// the chunked encoder (spm.cc) gives the same tokens.
extern std::atomic<bool> spm_disable_chunking_for_testing;
}  // namespace tokenizer_internal

}  // namespace ferry
