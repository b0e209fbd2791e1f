// Vocab: the token table every tokenizer kind shares (texts, scores, types, special ids,
// end-of-generation set) and the special-token partition of input text (llama.cpp's
// tokenizer_st_partition), built from GGUF-convention tokenizer.ggml.* metadata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

struct TokenData {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
  // When this special token is matched in text, strip whitespace on its left/right
  // (llama.cpp's LLAMA_TOKEN_ATTR_LSTRIP/RSTRIP; set per model family, e.g. Phi-3).
  bool lstrip = false;
  bool rstrip = false;
};

// A piece of input text after special-token partitioning: either raw text to run through the
// model's algorithm, or one special token id (then `text` is empty).
struct Fragment {
  int32_t token = -1;
  std::string_view text;
  bool is_token() const { return token >= 0; }
};

// Defaults a tokenizer kind supplies for keys the metadata may omit (llama.cpp's per-type
// defaults, e.g. SPM: bos 1, eos 2, unk 0, add_bos true, add_space_prefix true).
struct VocabDefaults {
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
};

class Vocab {
 public:
  static StatusOr<Vocab> FromMetadata(const Metadata& md, const VocabDefaults& defaults);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool IsValidId(int32_t id) const { return id >= 0 && id < size(); }
  const TokenData& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  // Id of the token whose text is exactly `text`, or -1. The SPM encoder calls this for every
  // candidate pair, so it is an open-addressing table of (hash, id) probed linearly: one cache
  // line per miss instead of a node walk.
  int32_t Find(std::string_view text) const {
    const uint64_t h = HashText(text);
    for (size_t i = h & slot_mask_;; i = (i + 1) & slot_mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && tokens_[static_cast<size_t>(s.id)].text == text) return s.id;
    }
  }
  static uint64_t HashText(std::string_view s);

  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t eot() const { return eot_; }
  int32_t eom() const { return eom_; }
  int32_t unk() const { return unk_; }
  int32_t pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool IsEog(int32_t id) const { return eog_.count(id) != 0; }

  // Splits `text` at special tokens, longest token text first, each occurrence left to right,
  // as llama.cpp does. Control and unknown tokens are matched only when `parse_special`;
  // user-defined tokens always are. Fragments point into `text`.
  std::vector<Fragment> Partition(std::string_view text, bool parse_special) const;

 private:
  struct Slot {
    uint64_t hash = 0;
    int32_t id = -1;  // -1: empty
  };

  std::vector<TokenData> tokens_;
  std::vector<Slot> slots_;  // power-of-two size, at most half full
  size_t slot_mask_ = 0;
  std::vector<int32_t> special_by_length_;  // control / user-defined / unknown, longest first
  std::unordered_set<int32_t> eog_;
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace ferry
