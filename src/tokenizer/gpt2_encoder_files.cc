// GPT-2-style encoder.json (a JSON object token -> id) + vocab.bpe (a "#version" line, then one
// "left right" merge per line) -> tokenizer.ggml.* metadata for the byte-level BPE tokenizer.
#include <nlohmann/json.hpp>

#include "tokenizer/loader_util.h"
#include "tokenizer/tokenizer.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using tokenizer_internal::BpeVocabSpec;
using tokenizer_internal::ReadWholeFile;

constexpr int64_t kMaxVocab = 1 << 24;
constexpr int32_t kLlama3Vocab = 128000;

}  // namespace

StatusOr<Metadata> LoadGpt2EncoderFiles(const std::string& encoder_json, const std::string& vocab_bpe,
                                        const std::string& pre) {
  FERRY_ASSIGN_OR_RETURN(std::string enc_text, ReadWholeFile(encoder_json));
  FERRY_ASSIGN_OR_RETURN(std::string bpe_text, ReadWholeFile(vocab_bpe));
  json enc = json::parse(enc_text, nullptr, /*allow_exceptions=*/false);
  if (enc.is_discarded() || !enc.is_object()) {
    return CorruptFileError("{}: not a JSON object", encoder_json);
  }
  BpeVocabSpec spec;
  std::vector<bool> present;
  for (auto it = enc.begin(); it != enc.end(); ++it) {
    if (!it.value().is_number_integer()) {
      return CorruptFileError("{}: '{}' has a non-integer id", encoder_json, it.key());
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxVocab) return CorruptFileError("{}: '{}' has id {}", encoder_json, it.key(), id);
    const auto i = static_cast<size_t>(id);
    if (i >= spec.tokens.size()) {
      spec.tokens.resize(i + 1);
      present.resize(i + 1, false);
    }
    if (present[i]) return CorruptFileError("{}: id {} is given twice", encoder_json, id);
    spec.tokens[i] = it.key();
    present[i] = true;
  }
  if (spec.tokens.empty()) return CorruptFileError("{}: empty vocabulary", encoder_json);
  spec.types.assign(spec.tokens.size(), static_cast<int32_t>(TokenType::kNormal));
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (!present[i]) {
      spec.tokens[i] = "[PAD" + std::to_string(i) + "]";
      spec.types[i] = static_cast<int32_t>(TokenType::kUnused);
    }
  }

  size_t pos = 0, line_no = 0;
  while (pos < bpe_text.size()) {
    size_t end = bpe_text.find('\n', pos);
    if (end == std::string::npos) end = bpe_text.size();
    std::string line = bpe_text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos) {
      return CorruptFileError("{}:{}: not a merge \"left right\": '{}'", vocab_bpe, line_no, line);
    }
    spec.merges.push_back(std::move(line));
  }

  const auto n = static_cast<int32_t>(spec.tokens.size());
  auto find = [&](std::string_view text) -> int32_t {
    for (int32_t i = n - 1; i >= 0; --i) {
      if (spec.tokens[static_cast<size_t>(i)] == text) return i;
    }
    return -1;
  };
  spec.pre = pre;
  if (pre.empty()) spec.pre = n == kLlama3Vocab ? "llama3" : "gpt-2";
  if (spec.pre == "llama3" && n == kLlama3Vocab) {
    for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>"}) {
      spec.tokens.emplace_back(special);
      spec.types.push_back(static_cast<int32_t>(TokenType::kControl));
    }
    spec.bos = kLlama3Vocab;
    spec.eos = kLlama3Vocab + 1;
    spec.add_bos = true;
  } else if (int32_t eot = find("<|endoftext|>"); eot >= 0) {
    spec.types[static_cast<size_t>(eot)] = static_cast<int32_t>(TokenType::kControl);
    spec.bos = eot;
    spec.eos = eot;
  }
  return ToMetadata(spec);
}

}  // namespace ferry
