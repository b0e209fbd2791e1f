// Tokenizer: text <-> token ids for a model vocabulary described by GGUF-convention metadata
// ("tokenizer.ggml.model", ".tokens", ".scores", ".token_type", ".bos_token_id", ...).
// Kinds: SentencePiece-style BPE ("llama": scores, byte fallback, space prefix), byte-level BPE
// ("gpt2": merges, tokenizer.ggml.pre regexes) and WordPiece ("bert").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"

namespace ferry {

// Token attributes, numeric values as llama.cpp's tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class TokenizerImpl;

class Tokenizer {
 public:
  static StatusOr<Tokenizer> FromMetadata(const Metadata& md);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: add BOS (and EOS) as the metadata says (tokenizer.ggml.add_bos_token, default
  // true for "llama"). parse_special: control/user-defined token texts in `text` become their
  // ids instead of being split (llama-tokenize's default).
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes this token contributes to output text: byte tokens give their byte, '▁' becomes
  // ' '. Control tokens give "" unless render_special.
  std::string TokenToPiece(int32_t id, bool render_special = false) const;
  // Concatenation of TokenToPiece (no leading-space stripping: matches llama.cpp's pieces).
  std::string Decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  // The raw vocabulary string of a token (e.g. "▁the", "<0x0A>").
  const std::string& TokenText(int32_t id) const;
  TokenType GetTokenType(int32_t id) const;
  float TokenScore(int32_t id) const;
  // Id of the token whose vocabulary string is exactly `text`, or -1.
  int32_t TokenId(std::string_view text) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none
  int32_t eot_id() const;  // -1 if none
  int32_t unk_id() const;  // -1 if none
  int32_t pad_id() const;  // -1 if none
  bool add_bos() const;
  bool add_eos() const;
  // SPM: a ' ' is put before the text (and after each special token) before encoding.
  bool add_space_prefix() const;
  // End of generation: eos, eot and other end tokens the metadata names.
  bool IsEog(int32_t id) const;
  // "llama" (SPM), "gpt2" (byte-level BPE) or "bert" (WordPiece).
  const std::string& model_name() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Streaming detokenizer: emits text only in whole UTF-8 characters, holding back the bytes of
// a character split across tokens until it completes. Ill-formed bytes become U+FFFD (one per
// maximal ill-formed subsequence), so the concatenated output of Push... + Flush() always equals
// utf8::Sanitize(tok.Decode(ids)) and is always valid UTF-8.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool render_special = false)
      : tok_(&tok), render_special_(render_special) {}
  // Text that is now complete (may be empty).
  std::string Push(int32_t id);
  // Whatever is pending (invalid trailing bytes are emitted as U+FFFD).
  std::string Flush();

 private:
  const Tokenizer* tok_;
  bool render_special_;
  std::string pending_;
};

// Side-file loaders producing tokenizer.ggml.* metadata (merged into the model's metadata):
// tokenizer.ggml.model, .tokens, .token_type, .scores (llama) or .merges and .pre (gpt2),
// .bos/.eos/.unknown(/.padding)_token_id, .add_bos_token, .add_eos_token, .add_space_prefix.
// Hugging Face tokenizer.json (+ tokenizer_config.json beside it if present): model.type "BPE"
// with byte_fallback (SentencePiece converted: Llama, Mistral, Phi-3; scores synthesized from
// merge ranks), byte-level "BPE" (GPT-2, GPT-NeoX, Falcon, Llama 3, Qwen2, StarCoder: the
// pre-tokenizer is mapped to its tokenizer.ggml.pre family) and "WordPiece" (BERT). A GPT-2
// encoder.json with vocab.bpe beside it is passed on to LoadGpt2EncoderFiles.
StatusOr<Metadata> LoadHfTokenizerJson(const std::string& path);
// GPT-2-style encoder.json (token -> id) + vocab.bpe (merges). `pre` empty: a 128,000-token
// vocabulary is taken for Llama 3's (pre "llama3", <|begin_of_text|> = 128000 and
// <|end_of_text|> = 128001 appended as BOS/EOS, as ollama does); any other gets pre "gpt-2"
// with <|endoftext|> as BOS/EOS when present.
StatusOr<Metadata> LoadGpt2EncoderFiles(const std::string& encoder_json, const std::string& vocab_bpe,
                                        const std::string& pre = "");
// SentencePiece tokenizer.model (protobuf, parsed with bounds checks).
StatusOr<Metadata> LoadSentencePieceModel(const std::string& path);
// llama2.c tokenizer .bin (tok512.bin, tokenizer.bin).
StatusOr<Metadata> LoadLlama2cTokenizer(const std::string& path, int32_t vocab_size);

}  // namespace ferry
