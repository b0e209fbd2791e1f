// PreTokenizer: cuts text into the words byte-level BPE merges within, by a sequence of regexes
// (PCRE2, Unicode properties), one list per tokenizer.ggml.pre family as llama.cpp defines them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ferry {

class PreTokenizer {
 public:
  // Byte range [first, second) of one piece.
  using Piece = std::pair<uint32_t, uint32_t>;

  // The regex list of a tokenizer.ggml.pre name ("gpt-2", "llama-bpe", "qwen2", "falcon", ...;
  // "" and "default" give llama.cpp's default list). kUnsupported for names it does not know.
  static StatusOr<PreTokenizer> ForType(std::string_view pre);
  // Patterns in PCRE2 syntax where \s and \S mean Unicode White_Space (as in llama.cpp and HF).
  static StatusOr<PreTokenizer> FromPatterns(const std::vector<std::string>& patterns);
  // The pre names ForType knows whose families llama.cpp sets ignore_merges / add_bos for.
  static bool IgnoresMerges(std::string_view pre);
  static bool AddsBos(std::string_view pre);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Each regex in turn splits every current piece into its matches and the text between them
  // (HF's Split with behavior "Isolated"; llama.cpp's unicode_regex_split). Pieces cover `text`
  // exactly and in order. Ill-formed UTF-8 bytes never match, so they end up in pieces of their
  // own and byte-level BPE keeps them (llama.cpp turns them into U+FFFD first).
  void Split(std::string_view text, std::vector<Piece>& out) const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry
