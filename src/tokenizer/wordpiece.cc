// WordPiece ("bert"), token for token as llama.cpp's llm_tokenizer_wpm:
//   1. special tokens are cut out first (Vocab::Partition); [CLS] / [SEP] wrap the whole input
//      when special tokens are added;
//   2. BERT basic tokenization of each raw fragment: code points; accents stripped (each code
//      point replaced by the first code point of its canonical decomposition, then combining marks
//      dropped); NUL, U+FFFD and control characters dropped; lowercased; words split at
//      White_Space; every punctuation character, ASCII symbol and CJK ideograph is a word of its
//      own;
//   3. each word, prefixed with U+2581 (llama.cpp's vocabulary stores word starts as "▁word" and
//      "##" continuations bare), is cut greedily into the longest vocabulary tokens from the
//      left; a word with any position no token starts at becomes [UNK] as a whole.
// Keys: tokenizer.ggml.cls_token_id (default bos, then 101), tokenizer.ggml.seperator_token_id
// (llama.cpp's spelling; default eos, then 102), tokenizer.ferry.lowercase and
// tokenizer.ferry.strip_accents (default true: uncased BERT).
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace ferry {
namespace {

bool IsChineseChar(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) ||
         (cp >= 0x2B920 && cp <= 0x2CEAF) ||  // as HF's BERT code (0x2B820 in Unicode)
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

class WordPieceTokenizer final : public TokenizerImpl {
 public:
  WordPieceTokenizer(Vocab vocab, bool lowercase, bool strip_accents)
      : TokenizerImpl(std::move(vocab), "bert"), lowercase_(lowercase), strip_accents_(strip_accents) {
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      max_token_len_ = std::max(max_token_len_, vocab_.token(id).text.size());
    }
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> out;
    if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
    std::vector<std::string> words;
    for (const Fragment& f : vocab_.Partition(text, parse_special)) {
      if (f.is_token()) {
        out.push_back(f.token);
        continue;
      }
      Preprocess(f.text, words);
      for (const std::string& w : words) EncodeWord(w, out);
    }
    if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
    return out;
  }

  // WordPiece vocabularies have no byte tokens; a stray one renders as nothing.
  std::string TextPiece(int32_t /*id*/, const TokenData& t) const override {
    return t.type == TokenType::kNormal ? utf8::UnescapeSpaces(t.text) : std::string();
  }

 private:
  void Preprocess(std::string_view text, std::vector<std::string>& words) const {
    words.assign(1, std::string());
    for (size_t i = 0; i < text.size();) {
      size_t n = 0;
      uint32_t cp = unicode::DecodeCodepoint(text.substr(i), &n);
      i += n;
      if (strip_accents_) cp = unicode::NfdBase(cp);
      if (unicode::IsWhitespace(cp)) {
        if (!words.back().empty()) words.emplace_back();
        continue;
      }
      const uint16_t flags = unicode::Flags(cp);
      if (cp == 0 || cp == 0xFFFD || (flags & unicode::kControl)) continue;
      if (strip_accents_ && (flags & unicode::kAccentMark)) continue;
      if (lowercase_) cp = unicode::ToLower(cp);
      if ((flags & unicode::kPunctuation) || (cp < 0x7F && (flags & unicode::kSymbol)) ||
          IsChineseChar(cp)) {
        if (!words.back().empty()) words.emplace_back();
        utf8::AppendCodepoint(words.back(), cp);
        words.emplace_back();
      } else {
        utf8::AppendCodepoint(words.back(), cp);
      }
    }
    if (words.back().empty()) words.pop_back();
  }

  void EncodeWord(const std::string& word, std::vector<int32_t>& out) const {
    const std::string w = std::string(utf8::kSpaceMarker).append(word);
    const size_t n = w.size();
    const size_t start = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool match = false;
      for (size_t j = std::min(n, i + max_token_len_ + 1); j > i; --j) {
        const int32_t id = vocab_.Find(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          match = true;
          i = j - 1;
          break;
        }
      }
      if (!match) {
        out.resize(start);
        break;
      }
    }
    if (out.size() == start && vocab_.unk() >= 0) out.push_back(vocab_.unk());
  }

  bool lowercase_;
  bool strip_accents_;
  size_t max_token_len_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<TokenizerImpl>> CreateWordPieceTokenizer(const Metadata& md) {
  VocabDefaults d;
  // [CLS] and [SEP] act as BOS and EOS (llama.cpp's defaults: cls 101, sep 102, unk 100, pad 0).
  d.bos = static_cast<int32_t>(md.GetInt("tokenizer.ggml.cls_token_id").value_or(101));
  d.eos = static_cast<int32_t>(md.GetInt("tokenizer.ggml.seperator_token_id").value_or(102));
  d.unk = 100;
  d.pad = 0;
  d.add_bos = true;
  d.add_eos = true;
  FERRY_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromMetadata(md, d));
  const bool lowercase = md.GetBool("tokenizer.ferry.lowercase").value_or(true);
  const bool strip_accents = md.GetBool("tokenizer.ferry.strip_accents").value_or(lowercase);
  return std::unique_ptr<TokenizerImpl>(new WordPieceTokenizer(std::move(vocab), lowercase, strip_accents));
}

}  // namespace ferry
