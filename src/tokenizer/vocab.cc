#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/log.h"

namespace ferry {
namespace {

// Texts llama.cpp treats as end-of-turn when tokenizer.ggml.eot_token_id is absent.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>",
};
// Texts llama.cpp puts in its end-of-generation set (and forces to control type).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
};

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

template <size_t N>
bool InList(const std::string_view (&list)[N], std::string_view s) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

TokenType TypeFromInt(int64_t v) {
  if (v >= 0 && v <= 6) return static_cast<TokenType>(v);
  return TokenType::kUndefined;
}

}  // namespace

uint64_t Vocab::HashText(std::string_view s) {
  // 8 bytes per step, multiply-xorshift mixing (tokens are short; quality only needs to spread
  // a few hundred thousand distinct strings).
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = kMul ^ (s.size() * 0xBF58476D1CE4E5B9ull);
  const char* p = s.data();
  size_t n = s.size();
  auto mix = [&](uint64_t v) {
    h = (h ^ v) * kMul;
    h ^= h >> 32;
  };
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    mix(v);
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    mix(v);
  }
  h ^= h >> 29;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 32);
}

StatusOr<Vocab> Vocab::FromMetadata(const Metadata& md, const VocabDefaults& defaults) {
  Vocab v;
  const MetaValue* tokens = md.Find("tokenizer.ggml.tokens");
  if (!tokens) return NotFoundError("tokenizer.ggml.tokens is missing: the file has no vocabulary");
  auto texts = md.GetStringArray("tokenizer.ggml.tokens");
  if (!texts) return CorruptFileError("tokenizer.ggml.tokens is not an array of strings");
  if (texts->empty()) return CorruptFileError("tokenizer.ggml.tokens is empty");
  if (texts->size() > static_cast<size_t>(INT32_MAX)) {
    return CorruptFileError("tokenizer.ggml.tokens has {} entries", texts->size());
  }
  const size_t n = texts->size();

  std::vector<float> scores;
  if (md.Has("tokenizer.ggml.scores")) {
    auto s = md.GetFloatArray("tokenizer.ggml.scores");
    if (!s) return CorruptFileError("tokenizer.ggml.scores is not a numeric array");
    if (s->size() < n) {
      return CorruptFileError("tokenizer.ggml.scores has {} entries for {} tokens", s->size(), n);
    }
    scores = std::move(*s);
  }
  std::vector<int64_t> types;
  if (md.Has("tokenizer.ggml.token_type")) {
    auto t = md.GetIntArray("tokenizer.ggml.token_type");
    if (!t) return CorruptFileError("tokenizer.ggml.token_type is not an integer array");
    if (t->size() < n) {
      return CorruptFileError("tokenizer.ggml.token_type has {} entries for {} tokens", t->size(), n);
    }
    types = std::move(*t);
  }

  v.tokens_.resize(n);
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  v.slots_.assign(cap, Slot{});
  v.slot_mask_ = cap - 1;
  for (size_t i = 0; i < n; ++i) {
    TokenData& td = v.tokens_[i];
    td.text = std::move((*texts)[i]);
    if (td.text.empty()) td.text = fmt::format("[EMPTY_{}]", i);  // as llama.cpp
    td.score = scores.empty() ? 0.0f : scores[i];
    td.type = types.empty() ? TokenType::kNormal : TypeFromInt(types[i]);
    if (int32_t dup = v.Find(td.text); dup >= 0) {
      return CorruptFileError("duplicate token in vocabulary: '{}' has ids {} and {}", td.text,
                              dup, i);
    }
    const uint64_t h = HashText(td.text);
    size_t k = h & v.slot_mask_;
    while (v.slots_[k].id >= 0) k = (k + 1) & v.slot_mask_;
    v.slots_[k] = Slot{h, static_cast<int32_t>(i)};
  }

  // Special ids: a type default (dropped if out of range), replaced by an in-range metadata value.
  auto special_id = [&](std::string_view key, int32_t def) {
    int32_t id = v.IsValidId(def) ? def : -1;
    if (auto x = md.GetInt(key)) {
      if (*x >= 0 && *x < v.size()) {
        id = static_cast<int32_t>(*x);
      } else if (*x != 0xFFFFFFFFll && *x != -1) {
        Log(LogLevel::kWarn, "tokenizer: {} = {} is out of range (vocab {}), ignored", key, *x,
            v.size());
      }
    }
    return id;
  };
  v.bos_ = special_id("tokenizer.ggml.bos_token_id", defaults.bos);
  v.eos_ = special_id("tokenizer.ggml.eos_token_id", defaults.eos);
  v.eot_ = special_id("tokenizer.ggml.eot_token_id", -1);
  v.eom_ = special_id("tokenizer.ggml.eom_token_id", -1);
  v.unk_ = special_id("tokenizer.ggml.unknown_token_id", defaults.unk);
  v.pad_ = special_id("tokenizer.ggml.padding_token_id", defaults.pad);
  v.add_bos_ = md.GetBool("tokenizer.ggml.add_bos_token").value_or(defaults.add_bos);
  v.add_eos_ = md.GetBool("tokenizer.ggml.add_eos_token").value_or(defaults.add_eos);
  v.add_space_prefix_ =
      md.GetBool("tokenizer.ggml.add_space_prefix").value_or(defaults.add_space_prefix);
  if (v.add_bos_ && v.bos_ < 0) {
    Log(LogLevel::kWarn, "tokenizer: add_bos_token is true but there is no BOS token; not adding");
    v.add_bos_ = false;
  }
  if (v.add_eos_ && v.eos_ < 0) {
    Log(LogLevel::kWarn, "tokenizer: add_eos_token is true but there is no EOS token; not adding");
    v.add_eos_ = false;
  }

  // End of generation, as llama.cpp decides it from the token texts (its issue 9606): tokens
  // that look like end markers are forced to control type so they never render as text.
  auto force_control = [&](int32_t id) {
    TokenType& t = v.tokens_[static_cast<size_t>(id)].type;
    if (t != TokenType::kControl) t = TokenType::kControl;
  };
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string& text = v.tokens_[static_cast<size_t>(id)].text;
    if (v.eot_ < 0 && InList(kEotTexts, text)) {
      v.eot_ = id;
      force_control(id);
    }
    if (v.eom_ < 0 && text == "<|eom_id|>") {
      v.eom_ = id;
      force_control(id);
    }
    if (InList(kEogTexts, text)) {
      v.eog_.insert(id);
      force_control(id);
    }
  }
  for (int32_t id : {v.eos_, v.eot_, v.eom_}) {
    if (id >= 0) v.eog_.insert(id);
  }

  for (int32_t id = 0; id < v.size(); ++id) {
    TokenType t = v.tokens_[static_cast<size_t>(id)].type;
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      v.special_by_length_.push_back(id);
    }
  }
  std::stable_sort(v.special_by_length_.begin(), v.special_by_length_.end(),
                   [&](int32_t a, int32_t b) {
                     return v.tokens_[static_cast<size_t>(a)].text.size() >
                            v.tokens_[static_cast<size_t>(b)].text.size();
                   });

  // Per-family strip attributes (llama.cpp sets them from general.name).
  std::string name = md.GetString("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_by_length_) v.tokens_[static_cast<size_t>(id)].rstrip = true;
    auto set_rstrip = [&](std::string_view text, bool value) {
      int32_t id = v.Find(text);
      if (id >= 0) v.tokens_[static_cast<size_t>(id)].rstrip = value;
    };
    set_rstrip("</s>", true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set_rstrip(t, false);
  }
  return v;
}

std::vector<Fragment> Vocab::Partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t id : special_by_length_) {
    const TokenData& t = tokens_[static_cast<size_t>(id)];
    if (!parse_special && (t.type == TokenType::kControl || t.type == TokenType::kUnknown)) {
      continue;
    }
    if (text.find(t.text) == std::string_view::npos) continue;  // cheap reject
    next.clear();
    next.reserve(frags.size() + 8);
    for (const Fragment& f : frags) {
      if (f.is_token()) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      while (true) {
        size_t m = rest.find(t.text);
        if (m == std::string_view::npos) {
          if (!rest.empty()) next.push_back({-1, rest});
          break;
        }
        std::string_view left = rest.substr(0, m);
        if (t.lstrip) {
          while (!left.empty() && IsAsciiSpace(left.back())) left.remove_suffix(1);
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest = rest.substr(m + t.text.size());
        if (t.rstrip) {
          while (!rest.empty() && IsAsciiSpace(rest.front())) rest.remove_prefix(1);
        }
      }
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace ferry
