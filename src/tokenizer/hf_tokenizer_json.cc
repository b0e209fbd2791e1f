// Hugging Face tokenizer.json (+ tokenizer_config.json beside it) -> tokenizer.ggml.* metadata.
//
// Byte-level BPE (GPT-2 style; ConvertByteLevel) and WordPiece (ConvertWordPiece) map onto the
// "gpt2" and "bert" kinds the way llama.cpp's converter writes GGUF files: added tokens become
// control (special) or user-defined tokens, merges are kept as "left right", the pre_tokenizer is
// recognized as one of llama.cpp's tokenizer.ggml.pre families, WordPiece tokens get llama.cpp's
// spelling ("▁" + word start, "##" dropped from continuations).
//
// model.type "BPE" with byte_fallback is the form Llama/Mistral/Phi-3 SentencePiece
// models are converted to. Such a tokenizer is run by the SPM algorithm, which merges by token
// score instead of by merge rank, so scores are synthesized from the merges:
//   score(t) = -r   where r is the lowest rank of a merge whose result is t,
//   score(t) = kNoMergeScore (far below every rank) for tokens no merge produces.
// Why this reproduces HF's merge order: HF repeatedly applies the adjacent pair with the lowest
// merge rank (leftmost on ties); SPM repeatedly applies the adjacent pair whose concatenation is
// the token with the highest score (leftmost on ties). With the scores above, both pick the same
// pair whenever (a) every adjacent pair whose concatenation is a vocab token has a merge, and (b)
// merges of one result hold adjacent ranks (different splits of one token never compete). The
// SentencePiece->HF converter emits, for every piece, all its splits into two pieces, ordered
// by the piece's score, which gives both. Merge tables trained natively with HF (GPT-2 style)
// violate (a); those tokenizers are byte-level BPE and are refused here anyway.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "tokenizer/loader_util.h"
#include "tokenizer/tokenizer.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using tokenizer_internal::IsByteTokenName;
using tokenizer_internal::ReadWholeFile;
using tokenizer_internal::BpeVocabSpec;
using tokenizer_internal::SpmVocabSpec;
using tokenizer_internal::ToMetadata;

constexpr float kNoMergeScore = -1e9f;
constexpr int64_t kMaxVocab = 1 << 24;  // ids above this are refused (a corrupt file, not a vocab)

std::optional<std::string> GetString(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}
std::optional<bool> GetBool(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}
const json* GetChild(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}
// tokenizer_config.json writes special tokens as "<s>" or {"content": "<s>", ...}.
std::optional<std::string> GetTokenString(const json& j, const char* key) {
  const json* v = GetChild(j, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  return GetString(*v, "content");
}

// Does this pre-tokenizer / normalizer tree contain a node of `type` (Sequence-aware)?
const json* FindNode(const json& j, std::string_view type) {
  if (!j.is_object()) return nullptr;
  if (GetString(j, "type") == std::string(type)) return &j;
  for (const char* list_key : {"normalizers", "pretokenizers", "decoders"}) {
    const json* list = GetChild(j, list_key);
    if (!list || !list->is_array()) continue;
    for (const json& e : *list) {
      if (const json* hit = FindNode(e, type)) return hit;
    }
  }
  return nullptr;
}

// model.type may be missing in old files: infer it from the keys.
std::string ModelType(const json& model) {
  if (auto t = GetString(model, "type")) return *t;
  if (GetChild(model, "merges")) return "BPE";
  if (GetChild(model, "continuing_subword_prefix") || GetChild(model, "max_input_chars_per_word")) {
    return "WordPiece";
  }
  const json* vocab = GetChild(model, "vocab");
  if (vocab && vocab->is_array()) return "Unigram";
  return "unknown";
}

struct Added {
  int64_t id;
  std::string content;
  bool special;
};

// model.vocab plus added_tokens, by id (ids may have gaps; added tokens may extend the vocab).
Status CollectVocab(const std::string& path, const json& root, const json& model,
                    std::vector<std::string>& tokens, std::vector<bool>& present,
                    std::vector<Added>& added) {
  const json* vocab = GetChild(model, "vocab");
  if (!vocab || !vocab->is_object()) return CorruptFileError("{}: model.vocab is not an object", path);
  auto place = [&](int64_t id, const std::string& text) -> Status {
    if (id < 0 || id >= kMaxVocab) return CorruptFileError("{}: token '{}' has id {}", path, text, id);
    const auto i = static_cast<size_t>(id);
    if (i >= tokens.size()) {
      tokens.resize(i + 1);
      present.resize(i + 1, false);
    }
    if (present[i] && tokens[i] != text) {
      return CorruptFileError("{}: id {} is both '{}' and '{}'", path, id, tokens[i], text);
    }
    tokens[i] = text;
    present[i] = true;
    return Status::Ok();
  };
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return CorruptFileError("{}: vocab entry '{}' has a non-integer id", path, it.key());
    }
    FERRY_RETURN_IF_ERROR(place(it.value().get<int64_t>(), it.key()));
  }
  if (const json* at = GetChild(root, "added_tokens"); at && at->is_array()) {
    for (const json& a : *at) {
      const json* id = GetChild(a, "id");
      auto content = GetString(a, "content");
      if (!id || !id->is_number_integer() || !content) {
        return CorruptFileError("{}: malformed added_tokens entry", path);
      }
      added.push_back({id->get<int64_t>(), *content, GetBool(a, "special").value_or(false)});
      FERRY_RETURN_IF_ERROR(place(added.back().id, added.back().content));
    }
  }
  if (tokens.empty()) return CorruptFileError("{}: empty vocabulary", path);
  return Status::Ok();
}

// Which special tokens wrap a single sequence (post_processor TemplateProcessing), overridden
// by tokenizer_config.json.
struct SpecialTexts {
  std::optional<std::string> bos, eos, pad, unk;
  std::optional<bool> add_bos, add_eos;
};
SpecialTexts ReadSpecialTexts(const json& root, const json* config) {
  SpecialTexts st;
  if (const json* pp = GetChild(root, "post_processor"); pp) {
    const json* tp = FindNode(*pp, "TemplateProcessing");
    const json* single = tp ? GetChild(*tp, "single") : nullptr;
    if (single && single->is_array()) {
      bool seen_seq = false;
      st.add_bos = false;
      st.add_eos = false;
      for (const json& item : *single) {
        if (GetChild(item, "Sequence")) {
          seen_seq = true;
        } else if (const json* sp = GetChild(item, "SpecialToken"); sp) {
          auto id = GetString(*sp, "id");
          if (!id) continue;
          (seen_seq ? st.add_eos : st.add_bos) = true;
          (seen_seq ? st.eos : st.bos) = id;
        }
      }
    }
  }
  if (config) {
    if (auto v = GetBool(*config, "add_bos_token")) st.add_bos = v;
    if (auto v = GetBool(*config, "add_eos_token")) st.add_eos = v;
    if (auto v = GetTokenString(*config, "bos_token")) st.bos = v;
    if (auto v = GetTokenString(*config, "eos_token")) st.eos = v;
    if (auto v = GetTokenString(*config, "pad_token")) st.pad = v;
    if (auto v = GetTokenString(*config, "unk_token")) st.unk = v;
  }
  return st;
}

// As llama.cpp's converter: added tokens that are special, or look like "<|...|>", are control.
bool LooksSpecial(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

// The tokenizer.ggml.pre family of a byte-level pre_tokenizer tree, or "" if unknown.
std::string PreFamily(const json* pre, const json* norm) {
  constexpr std::string_view kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  constexpr std::string_view kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // o200k_base (GPT-4o, gpt-oss), as tiktoken states it and tokenizer.json files carry it.
  constexpr std::string_view kGpt4o =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (!pre || pre->is_null()) return "";
  std::vector<const json*> steps;
  if (GetString(*pre, "type") == std::string("Sequence")) {
    const json* list = GetChild(*pre, "pretokenizers");
    if (!list || !list->is_array()) return "";
    for (const json& e : *list) steps.push_back(&e);
  } else {
    steps.push_back(pre);
  }
  std::vector<std::string> kinds;
  std::vector<std::string> regexes;
  bool individual_digits = false;
  for (const json* st : steps) {
    const std::string t = GetString(*st, "type").value_or("");
    kinds.push_back(t);
    if (t == "Split") {
      const json* pat = GetChild(*st, "pattern");
      if (auto r = pat ? GetString(*pat, "Regex") : std::nullopt) regexes.push_back(*r);
    }
    if (t == "Digits") individual_digits = GetBool(*st, "individual_digits").value_or(false);
    if (t == "ByteLevel" && !GetBool(*st, "use_regex").value_or(true)) kinds.back() = "ByteLevelNoRegex";
  }
  auto has = [&](std::string_view k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  auto has_regex = [&](std::string_view r) {
    return std::find(regexes.begin(), regexes.end(), r) != regexes.end();
  };
  if (has_regex(kLlama3)) return "llama3";
  if (has_regex(kQwen2)) return "qwen2";
  if (has_regex(kGpt4o)) return "gpt-4o";
  if (has("Punctuation") && has("ByteLevel") && has_regex("[0-9][0-9][0-9]")) return "falcon";
  if (kinds == std::vector<std::string>{"Digits", "ByteLevel"} && individual_digits) return "starcoder";
  if (kinds == std::vector<std::string>{"ByteLevel"}) {
    // GPT-2 and GPT-NeoX/MPT share the regex. GPT-NeoX's NFC normalizer is not applied
    // (llama.cpp does not either): text is expected in NFC already.
    return (norm && FindNode(*norm, "NFC")) ? "mpt" : "gpt-2";
  }
  return "";
}

StatusOr<Metadata> ConvertByteLevel(const std::string& path, const json& root, const json& model,
                                    const json* config) {
  BpeVocabSpec spec;
  spec.pre = PreFamily(GetChild(root, "pre_tokenizer"), GetChild(root, "normalizer"));
  if (spec.pre.empty()) {
    return UnsupportedError("{}: byte-level BPE with a pre_tokenizer Ferry does not know: {}", path,
                            GetChild(root, "pre_tokenizer") ? GetChild(root, "pre_tokenizer")->dump() : "none");
  }
  std::vector<bool> present;
  std::vector<Added> added;
  FERRY_RETURN_IF_ERROR(CollectVocab(path, root, model, spec.tokens, present, added));
  const size_t n = spec.tokens.size();
  spec.types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  for (size_t i = 0; i < n; ++i) {
    if (!present[i]) {
      spec.tokens[i] = "[PAD" + std::to_string(i) + "]";
      spec.types[i] = static_cast<int32_t>(TokenType::kUnused);
    }
  }
  for (const Added& a : added) {
    spec.types[static_cast<size_t>(a.id)] = static_cast<int32_t>(
        a.special || LooksSpecial(a.content) ? TokenType::kControl : TokenType::kUserDefined);
  }
  const json* merges = GetChild(model, "merges");
  if (!merges || !merges->is_array()) return CorruptFileError("{}: model.merges is not an array", path);
  spec.merges.reserve(merges->size());
  for (const json& m : *merges) {
    if (m.is_string()) {
      spec.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return CorruptFileError("{}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", path, spec.merges.size());
    }
  }
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t i = 0; i < n; ++i) id_of.emplace(spec.tokens[i], static_cast<int32_t>(i));
  auto find_id = [&](const std::optional<std::string>& text) -> int32_t {
    if (!text) return -1;
    auto it = id_of.find(*text);
    return it == id_of.end() ? -1 : it->second;
  };
  const SpecialTexts st = ReadSpecialTexts(root, config);
  // Without a name for them, BOS/EOS are the end-of-text token GPT-2-style vocabularies have.
  std::optional<std::string> fallback;
  for (const char* t : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (id_of.count(t)) {
      fallback = t;
      break;
    }
  }
  spec.bos = find_id(st.bos ? st.bos : fallback);
  spec.eos = find_id(st.eos ? st.eos : fallback);
  spec.pad = find_id(st.pad);
  spec.unk = find_id(st.unk ? st.unk : GetString(model, "unk_token"));
  if (st.add_bos) spec.add_bos = *st.add_bos && spec.bos >= 0;
  if (st.add_eos) spec.add_eos = *st.add_eos && spec.eos >= 0;
  if (GetBool(model, "ignore_merges").value_or(false)) {
    // Passed on through the pre family (llama3 ignores merges); nothing else to record.
  }
  return ToMetadata(spec);
}

StatusOr<Metadata> ConvertWordPiece(const std::string& path, const json& root, const json& model,
                                    const json* config) {
  BpeVocabSpec spec;
  spec.model = "bert";
  spec.pre = "bert-bge";
  std::vector<bool> present;
  std::vector<Added> added;
  FERRY_RETURN_IF_ERROR(CollectVocab(path, root, model, spec.tokens, present, added));
  const size_t n = spec.tokens.size();
  const std::string prefix = GetString(model, "continuing_subword_prefix").value_or("##");
  spec.types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  std::vector<std::string> original = spec.tokens;
  for (size_t i = 0; i < n; ++i) {
    std::string& t = spec.tokens[i];
    if (!present[i]) {
      t = "[PAD" + std::to_string(i) + "]";
      spec.types[i] = static_cast<int32_t>(TokenType::kUnused);
    } else if (t.size() >= 2 && t.front() == '[' && t.back() == ']') {
      // Bracketed names stay as they are.
    } else if (!prefix.empty() && t.compare(0, prefix.size(), prefix) == 0 && t.size() > prefix.size()) {
      t.erase(0, prefix.size());  // continuation: bare text
    } else {
      t.insert(0, "\xE2\x96\x81");  // word start: "▁" + text (llama.cpp's WPM vocabulary)
    }
  }
  for (const Added& a : added) {
    spec.types[static_cast<size_t>(a.id)] =
        static_cast<int32_t>(a.special ? TokenType::kControl : TokenType::kUserDefined);
  }
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t i = 0; i < n; ++i) id_of.emplace(original[i], static_cast<int32_t>(i));
  auto find_id = [&](const std::optional<std::string>& text) -> int32_t {
    if (!text) return -1;
    auto it = id_of.find(*text);
    return it == id_of.end() ? -1 : it->second;
  };
  const SpecialTexts st = ReadSpecialTexts(root, config);
  spec.cls = find_id(st.bos ? st.bos : std::optional<std::string>("[CLS]"));
  spec.sep = find_id(st.eos ? st.eos : std::optional<std::string>("[SEP]"));
  spec.unk = find_id(st.unk ? st.unk : GetString(model, "unk_token"));
  spec.pad = find_id(st.pad ? st.pad : std::optional<std::string>("[PAD]"));
  spec.mask = find_id(std::optional<std::string>("[MASK]"));
  if (st.add_bos) spec.add_bos = *st.add_bos && spec.cls >= 0;
  if (st.add_eos) spec.add_eos = *st.add_eos && spec.sep >= 0;
  if (const json* norm = GetChild(root, "normalizer"); norm) {
    if (const json* bn = FindNode(*norm, "BertNormalizer")) {
      spec.lowercase = GetBool(*bn, "lowercase").value_or(true);
      spec.strip_accents = GetBool(*bn, "strip_accents").value_or(*spec.lowercase);
    } else {
      spec.lowercase = FindNode(*norm, "Lowercase") != nullptr;
      spec.strip_accents = FindNode(*norm, "StripAccents") != nullptr;
    }
  } else {
    spec.lowercase = false;
    spec.strip_accents = false;
  }
  return ToMetadata(spec);
}

StatusOr<Metadata> Convert(const std::string& path, const json& root, const json* config) {
  const json* model = GetChild(root, "model");
  if (!model || !model->is_object()) return CorruptFileError("{}: no \"model\" object", path);
  const std::string type = ModelType(*model);
  const json* pre = GetChild(root, "pre_tokenizer");
  const json* norm = GetChild(root, "normalizer");
  const json* dec = GetChild(root, "decoder");
  const bool byte_level = (pre && FindNode(*pre, "ByteLevel")) || (dec && FindNode(*dec, "ByteLevel"));
  if (type == "WordPiece") return ConvertWordPiece(path, root, *model, config);
  if (type == "BPE" && byte_level) return ConvertByteLevel(path, root, *model, config);
  if (type != "BPE") {
    return UnsupportedError("{}: tokenizer.json model type '{}' is not supported", path, type);
  }
  if (!GetBool(*model, "byte_fallback").value_or(false)) {
    return UnsupportedError("{}: BPE tokenizer.json without byte_fallback is not supported yet", path);
  }

  std::vector<std::string> tokens;
  std::vector<bool> present;
  std::vector<Added> added;
  FERRY_RETURN_IF_ERROR(CollectVocab(path, root, *model, tokens, present, added));
  if (tokens.empty()) return CorruptFileError("{}: empty vocabulary", path);
  const size_t n = tokens.size();

  SpmVocabSpec spec;
  spec.types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  for (size_t i = 0; i < n; ++i) {
    if (!present[i]) {
      tokens[i] = "[PAD" + std::to_string(i) + "]";  // llama.cpp's converter fills gaps this way
      spec.types[i] = static_cast<int32_t>(TokenType::kUnused);
    } else if (IsByteTokenName(tokens[i])) {
      spec.types[i] = static_cast<int32_t>(TokenType::kByte);
    }
  }
  std::unordered_map<std::string, int32_t> id_of;
  id_of.reserve(n);
  for (size_t i = 0; i < n; ++i) id_of.emplace(tokens[i], static_cast<int32_t>(i));

  // Scores from merge ranks (see the top of the file).
  std::vector<int64_t> rank(n, -1);
  if (const json* merges = GetChild(*model, "merges"); merges) {
    if (!merges->is_array()) return CorruptFileError("{}: model.merges is not an array", path);
    int64_t r = 0;
    size_t missing = 0;
    for (const json& m : *merges) {
      std::string merged;
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos) return CorruptFileError("{}: merge {} has no space: '{}'", path, r, s);
        merged = s.substr(0, sp) + s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merged = m[0].get<std::string>() + m[1].get<std::string>();
      } else {
        return CorruptFileError("{}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", path, r);
      }
      auto it = id_of.find(merged);
      if (it == id_of.end()) {
        ++missing;
      } else if (rank[static_cast<size_t>(it->second)] < 0) {
        rank[static_cast<size_t>(it->second)] = r;
      }
      ++r;
    }
    if (r > (int64_t{1} << 24)) {
      Log(LogLevel::kWarn, "{}: {} merges: ranks past 2^24 lose precision as float scores", path, r);
    }
    if (missing > 0) Log(LogLevel::kWarn, "{}: {} merges produce no vocab token", path, missing);
  }
  spec.scores.resize(n);
  for (size_t i = 0; i < n; ++i) {
    spec.scores[i] = rank[i] >= 0 ? -static_cast<float>(rank[i]) : kNoMergeScore;
  }

  for (const Added& a : added) {
    spec.types[static_cast<size_t>(a.id)] =
        static_cast<int32_t>(a.special ? TokenType::kControl : TokenType::kUserDefined);
  }
  auto find_id = [&](const std::optional<std::string>& text) -> int32_t {
    if (!text) return -1;
    auto it = id_of.find(*text);
    return it == id_of.end() ? -1 : it->second;
  };
  spec.unk = find_id(GetString(*model, "unk_token"));
  if (spec.unk >= 0) spec.types[static_cast<size_t>(spec.unk)] = static_cast<int32_t>(TokenType::kUnknown);

  // Space prefix: normalizer Prepend("▁") (Llama) or a Metaspace pre-tokenizer that prepends.
  bool space_prefix = false;
  if (norm) {
    if (const json* p = FindNode(*norm, "Prepend"); p && GetString(*p, "prepend") == "\xE2\x96\x81") {
      space_prefix = true;
    }
  }
  if (pre) {
    if (const json* ms = FindNode(*pre, "Metaspace")) {
      auto scheme = GetString(*ms, "prepend_scheme");
      space_prefix = scheme ? *scheme != "never" : GetBool(*ms, "add_prefix_space").value_or(true);
    }
  }
  spec.add_space_prefix = space_prefix;

  // BOS/EOS: the post-processor template says which tokens wrap a single sequence;
  // tokenizer_config.json, when present, has the final word.
  std::optional<std::string> bos_text, eos_text;
  std::optional<bool> add_bos, add_eos;
  if (const json* pp = GetChild(root, "post_processor"); pp) {
    const json* tp = FindNode(*pp, "TemplateProcessing");
    const json* single = tp ? GetChild(*tp, "single") : nullptr;
    if (single && single->is_array()) {
      bool seen_seq = false;
      add_bos = false;
      add_eos = false;
      for (const json& item : *single) {
        if (GetChild(item, "Sequence")) {
          seen_seq = true;
        } else if (const json* st = GetChild(item, "SpecialToken"); st) {
          auto id = GetString(*st, "id");
          if (!id) continue;
          if (seen_seq) {
            add_eos = true;
            eos_text = id;
          } else {
            add_bos = true;
            bos_text = id;
          }
        }
      }
    }
  }
  if (config) {
    if (auto v = GetBool(*config, "add_bos_token")) add_bos = v;
    if (auto v = GetBool(*config, "add_eos_token")) add_eos = v;
    if (auto v = GetTokenString(*config, "bos_token")) bos_text = v;
    if (auto v = GetTokenString(*config, "eos_token")) eos_text = v;
    if (auto v = GetTokenString(*config, "pad_token")) spec.pad = find_id(v);
    if (auto v = GetTokenString(*config, "unk_token"); v && find_id(v) >= 0) spec.unk = find_id(v);
  }
  spec.bos = find_id(bos_text ? bos_text : std::optional<std::string>("<s>"));
  spec.eos = find_id(eos_text ? eos_text : std::optional<std::string>("</s>"));
  spec.add_bos = add_bos.value_or(true) && spec.bos >= 0;
  spec.add_eos = add_eos.value_or(false) && spec.eos >= 0;
  spec.tokens = std::move(tokens);
  return ToMetadata(spec);
}

}  // namespace

StatusOr<Metadata> LoadHfTokenizerJson(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return CorruptFileError("{}: not a JSON object", path);
  if (auto m = root.find("model"); m == root.end() || !m->is_object()) {
    // A GPT-2 encoder.json (token -> id) with its merges in vocab.bpe beside it.
    const auto bpe_path = std::filesystem::path(path).parent_path() / "vocab.bpe";
    std::error_code bpe_ec;
    if (std::filesystem::exists(bpe_path, bpe_ec)) return LoadGpt2EncoderFiles(path, bpe_path.string());
    return CorruptFileError("{}: no \"model\" object (and no vocab.bpe beside it)", path);
  }

  std::optional<json> config;
  const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    FERRY_ASSIGN_OR_RETURN(std::string ctext, ReadWholeFile(config_path.string()));
    json c = json::parse(ctext, nullptr, /*allow_exceptions=*/false);
    if (c.is_discarded() || !c.is_object()) {
      return CorruptFileError("{}: not a JSON object", config_path.string());
    }
    config = std::move(c);
  }
  try {
    return Convert(path, root, config ? &*config : nullptr);
  } catch (const json::exception& e) {  // a type the checks above did not foresee
    return CorruptFileError("{}: {}", path, e.what());
  }
}

}  // namespace ferry
