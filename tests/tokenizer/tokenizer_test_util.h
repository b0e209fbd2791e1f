// Helpers for the tokenizer tests: tokenizers from the shared vocab-only GGUF files and the
// llama.cpp conformance vectors (.inp/.out).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace ferry::testing {

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// GGUF metadata of an asset (relative to the assets dir).
inline StatusOr<Metadata> GgufMetadata(const std::string& rel) {
  FERRY_ASSIGN_OR_RETURN(auto src, formats::OpenGguf(AssetPath(rel)));
  return src->metadata();
}

inline StatusOr<Tokenizer> GgufTokenizer(const std::string& rel) {
  FERRY_ASSIGN_OR_RETURN(Metadata md, GgufMetadata(rel));
  return Tokenizer::FromMetadata(md);
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Parses NAME.inp / NAME.out the way llama.cpp's test-tokenizer-0 does: inputs separated by
// "\n__ggml_vocab_test__\n" (a trailing separator ends the list), one output line per input.
inline std::vector<VocabCase> ReadVocabCases(const std::string& gguf_rel) {
  const std::string inp = ReadFileOrEmpty(AssetPath(gguf_rel + ".inp"));
  const std::string out = ReadFileOrEmpty(AssetPath(gguf_rel + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<VocabCase> cases;
  std::istringstream lines(out);
  std::string line;
  for (const std::string& t : texts) {
    if (!std::getline(lines, line)) break;
    VocabCase c{t, {}};
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << gguf_rel << ": .inp and .out disagree on the count";
  return cases;
}

inline std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s.push_back(' ');
    s.append(std::to_string(id));
  }
  return s;
}

// Runs every case (add_special=false, parse_special=false, as test-tokenizer-0), prints
// "<name>: k/n cases match" and returns the number of mismatches.
inline int RunVocabCases(const std::string& name, const Tokenizer& tok,
                         const std::vector<VocabCase>& cases) {
  int ok = 0;
  for (const VocabCase& c : cases) {
    std::vector<int32_t> got = tok.Encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (got == c.ids) {
      ++ok;
    } else {
      ADD_FAILURE() << name << ": '" << c.text << "'\n  expected " << IdsToString(c.ids)
                    << "\n  got      " << IdsToString(got);
    }
  }
  std::printf("%s: %d/%zu cases match\n", name.c_str(), ok, cases.size());
  return static_cast<int>(cases.size()) - ok;
}

}  // namespace ferry::testing
