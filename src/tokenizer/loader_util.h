// Shared pieces of the side-file tokenizer loaders: the SPM vocabulary they all produce, its
// conversion to tokenizer.ggml.* metadata, and whole-file reading with Status errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"

namespace ferry::tokenizer_internal {

struct SpmVocabSpec {
  std::vector<std::string> tokens;
  std::vector<float> scores;   // same length as tokens
  std::vector<int32_t> types;  // TokenType values, same length as tokens
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1: absent (key not written)
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
};

// tokenizer.ggml.model = "llama" plus every key of `spec`.
Metadata ToMetadata(const SpmVocabSpec& spec);

// A byte-level BPE ("gpt2") or WordPiece ("bert") vocabulary from a side file.
struct BpeVocabSpec {
  std::string model = "gpt2";  // or "bert"
  std::string pre = "gpt-2";   // tokenizer.ggml.pre
  std::vector<std::string> tokens;
  std::vector<int32_t> types;       // TokenType values, same length as tokens
  std::vector<std::string> merges;  // "left right", by rank (gpt2 only)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1: absent (key not written)
  int32_t cls = -1, sep = -1, mask = -1;           // bert only
  std::optional<bool> add_bos, add_eos;            // absent: the kind's default
  std::optional<bool> lowercase, strip_accents;    // bert only
};

// tokenizer.ggml.model = spec.model plus every key of `spec`.
Metadata ToMetadata(const BpeVocabSpec& spec);

// Reads a whole file (tokenizer side files are small); kNotFound / kIoError on failure.
StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes = size_t{1} << 31);

// True if `s` is a byte-fallback token name "<0xXX>" (uppercase or lowercase hex).
bool IsByteTokenName(const std::string& s);

}  // namespace ferry::tokenizer_internal
