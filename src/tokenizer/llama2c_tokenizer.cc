// llama2.c tokenizer .bin (tokenizer.bin, tok512.bin), as written by llama2.c's tokenizer.py:
//   int32 max_token_length; then vocab_size times { float32 score; int32 len; len bytes }.
// The export replaced U+2581 by ' ' and wrote BOS/EOS as "\n<s>\n" / "\n</s>\n"; both are undone
// here so the result equals the SentencePiece vocabulary (and llama.cpp's GGUF of it).
#include <cstring>

#include "tokenizer/loader_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ferry {

using tokenizer_internal::IsByteTokenName;
using tokenizer_internal::ReadWholeFile;
using tokenizer_internal::SpmVocabSpec;
using tokenizer_internal::ToMetadata;

StatusOr<Metadata> LoadLlama2cTokenizer(const std::string& path, int32_t vocab_size) {
  if (vocab_size <= 0) {
    return InvalidArgumentError("{}: vocab_size must be positive, got {}", path, vocab_size);
  }
  FERRY_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(path));
  size_t pos = 0;
  auto read_i32 = [&](int32_t& v) {
    if (data.size() - pos < 4) return false;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return true;
  };
  int32_t max_token_length = 0;
  if (!read_i32(max_token_length)) return CorruptFileError("{}: too short for a header", path);
  // Each token takes at least 8 bytes: refuse impossible sizes before reserving.
  if (static_cast<size_t>(vocab_size) > (data.size() - pos) / 8) {
    return CorruptFileError("{}: {} bytes cannot hold {} tokens", path, data.size(), vocab_size);
  }

  SpmVocabSpec spec;
  spec.tokens.reserve(static_cast<size_t>(vocab_size));
  for (int32_t i = 0; i < vocab_size; ++i) {
    float score = 0;
    int32_t len = 0;
    if (data.size() - pos < 4) return CorruptFileError("{}: truncated at token {}", path, i);
    std::memcpy(&score, data.data() + pos, 4);
    pos += 4;
    if (!read_i32(len)) return CorruptFileError("{}: truncated at token {}", path, i);
    if (len < 0 || static_cast<size_t>(len) > data.size() - pos) {
      return CorruptFileError("{}: token {} has length {} past the end of the file", path, i, len);
    }
    std::string raw = data.substr(pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);

    std::string text;
    if (raw == "\n<s>\n") {
      text = "<s>";
    } else if (raw == "\n</s>\n") {
      text = "</s>";
    } else {
      for (char c : raw) {
        if (c == ' ') {
          text.append(utf8::kSpaceMarker);
        } else {
          text.push_back(c);
        }
      }
    }
    TokenType type = TokenType::kNormal;
    if (i == 0 && text == "<unk>") {
      type = TokenType::kUnknown;
    } else if ((i == 1 && text == "<s>") || (i == 2 && text == "</s>")) {
      type = TokenType::kControl;
    } else if (IsByteTokenName(text)) {
      type = TokenType::kByte;
    }
    spec.tokens.push_back(std::move(text));
    spec.scores.push_back(score);
    spec.types.push_back(static_cast<int32_t>(type));
  }
  spec.unk = 0;
  spec.bos = vocab_size > 1 ? 1 : -1;
  spec.eos = vocab_size > 2 ? 2 : -1;
  spec.add_bos = spec.bos >= 0;
  spec.add_eos = false;
  spec.add_space_prefix = true;
  return ToMetadata(spec);
}

}  // namespace ferry
