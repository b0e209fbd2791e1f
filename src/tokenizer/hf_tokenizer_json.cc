// Hugging Face tokenizer.json (+ tokenizer_config.json beside it) -> tokenizer.ggml.* metadata.
//
// Supported: model.type "BPE" with byte_fallback, the form Llama/Mistral/Phi-3 SentencePiece
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

StatusOr<Metadata> Convert(const std::string& path, const json& root, const json* config) {
  const json* model = GetChild(root, "model");
  if (!model || !model->is_object()) return CorruptFileError("{}: no \"model\" object", path);
  const std::string type = ModelType(*model);
  const json* pre = GetChild(root, "pre_tokenizer");
  const json* norm = GetChild(root, "normalizer");
  const json* dec = GetChild(root, "decoder");
  const bool byte_level = (pre && FindNode(*pre, "ByteLevel")) || (dec && FindNode(*dec, "ByteLevel"));
  if (type != "BPE") {
    return UnsupportedError("{}: tokenizer.json model type '{}' is not supported yet", path, type);
  }
  if (byte_level) {
    return UnsupportedError("{}: byte-level BPE (GPT-2 style) tokenizer.json is not supported yet",
                            path);
  }
  if (!GetBool(*model, "byte_fallback").value_or(false)) {
    return UnsupportedError("{}: BPE tokenizer.json without byte_fallback is not supported yet", path);
  }

  // Vocabulary (ids may have gaps; added tokens may extend it).
  const json* vocab = GetChild(*model, "vocab");
  if (!vocab || !vocab->is_object()) return CorruptFileError("{}: model.vocab is not an object", path);
  std::vector<std::string> tokens;
  std::vector<bool> present;
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
  struct Added {
    int64_t id;
    std::string content;
    bool special;
  };
  std::vector<Added> added;
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
