// Every llama.cpp conformance vector (.inp/.out, add_special=false, parse_special=false) for every
// vocabulary the shared assets hold, loaded three ways: the vocab-only GGUF, the Hugging Face
// tokenizer.json of the same vocabulary, and (Llama 3) GPT-2-style encoder.json + vocab.bpe.
// Prints one "[vocab] NAME: k/n" line per vocabulary.
#include "tokenizer_test_util.h"

namespace ferry {
namespace {

using testing::AssetPath;
using testing::GgufTokenizer;
using testing::ReadVocabCases;

std::string VocabRel(const std::string& name) { return "llama.cpp-vocab/ggml-vocab-" + name + ".gguf"; }

// Runs the cases of vectors `vectors` with `tok`, printing "[vocab] label: k/n".
int Check(const std::string& label, const Tokenizer& tok, const std::string& vectors) {
  const auto cases = ReadVocabCases(VocabRel(vectors));
  EXPECT_GE(cases.size(), 40u) << vectors;
  int ok = 0;
  for (const auto& c : cases) {
    const std::vector<int32_t> got = tok.Encode(c.text, false, false);
    if (got == c.ids) {
      ++ok;
    } else {
      ADD_FAILURE() << label << ": '" << c.text << "'\n  expected " << testing::IdsToString(c.ids)
                    << "\n  got      " << testing::IdsToString(got);
    }
  }
  std::printf("[vocab] %s: %d/%zu\n", label.c_str(), ok, cases.size());
  return static_cast<int>(cases.size()) - ok;
}

class GgufVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVocab, MatchesLlamaCpp) {
  const std::string rel = VocabRel(GetParam());
  FERRY_REQUIRE_ASSET(rel);
  FERRY_REQUIRE_ASSET(rel + ".out");
  auto tok = GgufTokenizer(rel);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(Check(GetParam(), *tok, GetParam()), 0);
}

INSTANTIATE_TEST_SUITE_P(All, GgufVocab,
                         ::testing::Values("bert-bge", "deepseek-coder", "deepseek-llm", "falcon",
                                           "gpt-2", "llama-spm", "mpt", "phi-3", "refact",
                                           "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

TEST(Gpt2EncoderFiles, Llama3MatchesLlamaBpeVectors) {
  FERRY_REQUIRE_ASSET("llama3.2-bpe/encoder.json");
  FERRY_REQUIRE_ASSET(VocabRel("llama-bpe") + ".out");
  auto md = LoadGpt2EncoderFiles(AssetPath("llama3.2-bpe/encoder.json"), AssetPath("llama3.2-bpe/vocab.bpe"));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_EQ(md->GetString("tokenizer.ggml.pre"), "llama3");
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->n_vocab(), 128002);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
  EXPECT_EQ(tok->Encode("hello world", false, false), std::vector<int32_t>({15339, 1917}));
  EXPECT_EQ(tok->Encode("hello world", true, false), std::vector<int32_t>({128000, 15339, 1917}));
  EXPECT_EQ(tok->Encode("<|begin_of_text|>hi", false, true), std::vector<int32_t>({128000, 6151}));
  EXPECT_EQ(Check("llama-bpe (llama3.2 encoder.json + vocab.bpe)", *tok, "llama-bpe"), 0);
  // Through the tokenizer.json entry point too (encoder.json with vocab.bpe beside it).
  auto md2 = LoadHfTokenizerJson(AssetPath("llama3.2-bpe/encoder.json"));
  ASSERT_TRUE(md2.ok()) << md2.status().ToString();
  EXPECT_EQ(md2->GetString("tokenizer.ggml.pre"), "llama3");
}

struct HfCase {
  const char* folder;   // under hf-tokenizers/
  const char* vectors;  // llama.cpp-vocab vectors it must match
  const char* gguf;     // the GGUF whose vocabulary it must equal, or ""
};

class HfVocab : public ::testing::TestWithParam<HfCase> {};

TEST_P(HfVocab, MatchesLlamaCpp) {
  const HfCase& c = GetParam();
  const std::string json_rel = std::string("hf-tokenizers/") + c.folder + "/tokenizer.json";
  FERRY_REQUIRE_ASSET(json_rel);
  FERRY_REQUIRE_ASSET(VocabRel(c.vectors) + ".out");
  auto md = LoadHfTokenizerJson(AssetPath(json_rel));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  if (*c.gguf) {
    auto gguf = testing::GgufMetadata(VocabRel(c.gguf));
    ASSERT_TRUE(gguf.ok());
    auto want = gguf->GetStringArray("tokenizer.ggml.tokens");
    auto got = md->GetStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(want && got);
    size_t same = 0;
    for (size_t i = 0; i < std::min(want->size(), got->size()); ++i) same += (*want)[i] == (*got)[i];
    EXPECT_EQ(same, got->size()) << "token texts differ from " << c.gguf;
    auto wtypes = gguf->GetIntArray("tokenizer.ggml.token_type");
    auto gtypes = md->GetIntArray("tokenizer.ggml.token_type");
    size_t type_diffs = 0;
    for (size_t i = 0; i < std::min(wtypes->size(), gtypes->size()); ++i) {
      if ((*wtypes)[i] != (*gtypes)[i] && ++type_diffs <= 5) {
        ADD_FAILURE() << c.folder << ": type of " << i << " '" << (*got)[i] << "' is " << (*gtypes)[i]
                      << ", GGUF says " << (*wtypes)[i];
      }
    }
  }
  EXPECT_EQ(Check(std::string(c.folder) + " (tokenizer.json) -> " + c.vectors, *tok, c.vectors), 0);
}

INSTANTIATE_TEST_SUITE_P(All, HfVocab,
                         ::testing::Values(HfCase{"gpt2", "gpt-2", "gpt-2"},
                                           HfCase{"llama-2", "llama-spm", ""},
                                           HfCase{"phi-3-mini-4k-instruct", "phi-3", ""},
                                           HfCase{"gpt-neox-20b", "mpt", "gpt-neox"},
                                           HfCase{"falcon-7b", "falcon", "falcon"},
                                           HfCase{"bert-base-uncased", "bert-bge", "bert-bge"}),
                         [](const auto& info) {
                           std::string n = info.param.folder;
                           for (char& ch : n) ch = (ch == '-') ? '_' : ch;
                           return n;
                         });

}  // namespace
}  // namespace ferry
