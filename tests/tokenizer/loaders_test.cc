// Side-file loaders (llama2.c .bin, SentencePiece .model, HF tokenizer.json) against the GGUF
// vocabularies of the same models, plus their error paths.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer_test_util.h"

namespace ferry {
namespace {

using testing::AssetPath;
using testing::GgufMetadata;
using testing::GgufTokenizer;
using testing::ReadFileOrEmpty;
using testing::ReadVocabCases;
using testing::RunVocabCases;

constexpr const char* kLlamaSpm = "llama.cpp-vocab/ggml-vocab-llama-spm.gguf";

void ExpectSameVocab(const Metadata& got, const Metadata& want, bool compare_scores) {
  auto gt = got.GetStringArray("tokenizer.ggml.tokens");
  auto wt = want.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(gt && wt);
  ASSERT_EQ(gt->size(), wt->size());
  size_t diffs = 0;
  for (size_t i = 0; i < gt->size(); ++i) {
    if ((*gt)[i] != (*wt)[i] && ++diffs < 10) {
      ADD_FAILURE() << "token " << i << ": '" << (*gt)[i] << "' vs '" << (*wt)[i] << "'";
    }
  }
  EXPECT_EQ(diffs, 0u);
  EXPECT_EQ(got.GetIntArray("tokenizer.ggml.token_type"), want.GetIntArray("tokenizer.ggml.token_type"));
  if (compare_scores) {
    EXPECT_EQ(got.GetFloatArray("tokenizer.ggml.scores"), want.GetFloatArray("tokenizer.ggml.scores"));
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id"}) {
    EXPECT_EQ(got.GetInt(key), want.GetInt(key)) << key;
  }
}

std::string WriteTemp(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Llama2cTokenizer, MatchesStories260KGguf) {
  FERRY_REQUIRE_ASSET("tok512.bin");
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto md = LoadLlama2cTokenizer(AssetPath("tok512.bin"), 512);
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto gguf = GgufMetadata("stories260K.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  ExpectSameVocab(*md, *gguf, /*compare_scores=*/true);
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Encode("Once upon a time", true, true),
            std::vector<int32_t>({1, 403, 407, 261, 378}));
}

TEST(Llama2cTokenizer, Errors) {
  FERRY_REQUIRE_ASSET("tok512.bin");
  const std::string dir = testing::TempDir();
  EXPECT_EQ(LoadLlama2cTokenizer(dir + "/missing.bin", 512).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadLlama2cTokenizer(AssetPath("tok512.bin"), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadLlama2cTokenizer(AssetPath("tok512.bin"), 513).status().code(),
            StatusCode::kCorruptFile);
  const std::string bytes = ReadFileOrEmpty(AssetPath("tok512.bin"));
  for (size_t cut : {size_t{0}, size_t{3}, size_t{4}, size_t{11}, size_t{100}, bytes.size() - 1}) {
    auto st = LoadLlama2cTokenizer(WriteTemp(dir, "cut.bin", bytes.substr(0, cut)), 512).status();
    EXPECT_EQ(st.code(), StatusCode::kCorruptFile) << cut;
  }
  std::string bad = bytes;
  const int32_t huge = 1 << 30;
  std::memcpy(&bad[8], &huge, 4);  // first token's length
  EXPECT_EQ(LoadLlama2cTokenizer(WriteTemp(dir, "bad.bin", bad), 512).status().code(),
            StatusCode::kCorruptFile);
}

TEST(SentencePieceModel, MatchesStories260KGguf) {
  FERRY_REQUIRE_ASSET("tok512.model");
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto md = LoadSentencePieceModel(AssetPath("tok512.model"));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto gguf = GgufMetadata("stories260K.gguf");
  ASSERT_TRUE(gguf.ok());
  ExpectSameVocab(*md, *gguf, /*compare_scores=*/true);
  EXPECT_EQ(md->GetBool("tokenizer.ggml.add_space_prefix"), true);
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->Encode("Lily wanted to", true, true), std::vector<int32_t>({1, 317, 391, 266, 267}));
}

TEST(SentencePieceModel, CorruptInputsNeverCrash) {
  FERRY_REQUIRE_ASSET("tok512.model");
  const std::string dir = testing::TempDir();
  EXPECT_EQ(LoadSentencePieceModel(dir + "/missing.model").status().code(), StatusCode::kNotFound);
  const std::string bytes = ReadFileOrEmpty(AssetPath("tok512.model"));
  ASSERT_FALSE(bytes.empty());
  // Every prefix: a clean error or (at a message boundary) a smaller valid model.
  const std::string path = dir + "/cut.model";
  int errors = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    auto md = LoadSentencePieceModel(WriteTemp(dir, "cut.model", bytes.substr(0, cut)));
    if (!md.ok()) ++errors;
  }
  EXPECT_GT(errors, 0);
  // Random byte flips.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string b = bytes;
    for (int k = 0; k < 4; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    auto md = LoadSentencePieceModel(WriteTemp(dir, "flip.model", b));
    if (md.ok()) {
      (void)Tokenizer::FromMetadata(*md);  // may fail (e.g. duplicates), must not crash
    }
  }
  std::string garbage(1000, '\xFF');
  EXPECT_EQ(LoadSentencePieceModel(WriteTemp(dir, "garbage.model", garbage)).status().code(),
            StatusCode::kCorruptFile);
}

TEST(HfTokenizerJson, Llama2MatchesGgufVocabAndConformance) {
  const char* kJson = "hf-tokenizers/llama-2/tokenizer.json";
  FERRY_REQUIRE_ASSET(kJson);
  FERRY_REQUIRE_ASSET(kLlamaSpm);
  auto md = LoadHfTokenizerJson(AssetPath(kJson));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto gguf = GgufMetadata(kLlamaSpm);
  ASSERT_TRUE(gguf.ok());
  ExpectSameVocab(*md, *gguf, /*compare_scores=*/false);
  EXPECT_EQ(md->GetBool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(md->GetBool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_EQ(md->GetBool("tokenizer.ggml.add_space_prefix"), true);
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(RunVocabCases("llama-spm via llama-2 tokenizer.json", *tok, ReadVocabCases(kLlamaSpm)), 0);
  EXPECT_EQ(tok->Encode("The quick brown fox jumps over the lazy dog", true, true),
            std::vector<int32_t>({1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366,
                                  11203}));
  // Same ids as the GGUF tokenizer on a long real text.
  if (testing::HaveAsset("eval-text/tinystories_sample.txt")) {
    auto ref = GgufTokenizer(kLlamaSpm);
    ASSERT_TRUE(ref.ok());
    const std::string text = ReadFileOrEmpty(AssetPath("eval-text/tinystories_sample.txt"));
    EXPECT_EQ(tok->Encode(text, true, true), ref->Encode(text, true, true));
  }
}

TEST(HfTokenizerJson, Phi3MatchesGgufConformance) {
  const char* kJson = "hf-tokenizers/phi-3-mini-4k-instruct/tokenizer.json";
  const char* kGguf = "llama.cpp-vocab/ggml-vocab-phi-3.gguf";
  FERRY_REQUIRE_ASSET(kJson);
  FERRY_REQUIRE_ASSET(kGguf);
  auto md = LoadHfTokenizerJson(AssetPath(kJson));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->eos_id(), 32000);  // tokenizer_config.json: eos_token <|endoftext|>
  EXPECT_TRUE(tok->IsEog(32007));   // <|end|>
  EXPECT_EQ(RunVocabCases("phi-3 via tokenizer.json", *tok, ReadVocabCases(kGguf)), 0);
}

TEST(HfTokenizerJson, Mistral7bLoadsAndRoundTrips) {
  const char* kJson = "hf-tokenizers/mistral-7b-v0.1/tokenizer.json";
  FERRY_REQUIRE_ASSET(kJson);
  auto md = LoadHfTokenizerJson(AssetPath(kJson));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->add_space_prefix());  // Metaspace, prepend_scheme "first"
  for (const std::string text : {"Hello world", "  two  spaces\n\tand tabs", "日本語のテキスト",
                                 "emoji 🦙 and ½ Äpfel", "[INST] code: x = y + 1; [/INST]"}) {
    std::vector<int32_t> ids = tok->Encode(text, true, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(tok->Decode(ids), " " + text);
  }
  // Spot check against the Mistral vocabulary: "▁Hello" and "▁world" are single tokens.
  std::vector<int32_t> ids = tok->Encode("Hello world", false, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->TokenText(ids[0]), "\xE2\x96\x81Hello");
  EXPECT_EQ(tok->TokenText(ids[1]), "\xE2\x96\x81world");
}

TEST(HfTokenizerJson, UnknownByteLevelPreTokenizerIsUnsupported) {
  const std::string dir = testing::TempDir() + "/odd-pre";
  std::filesystem::create_directories(dir);
  const char* odd = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "x+"}, "behavior": "Isolated"},
        {"type": "ByteLevel", "use_regex": false}]}})";
  auto st = LoadHfTokenizerJson(WriteTemp(dir, "tokenizer.json", odd)).status();
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("pre_tokenizer"), std::string::npos) << st.ToString();
}

// gpt-oss's tokenizer.json form: o200k_base's split regex, then byte-level without its own regex.
// The regex is recognized as llama.cpp's "gpt-4o" family, whose split (unlike llama3's) breaks
// "HelloWorld" at the case change, so the merges that would join it never apply across it.
TEST(HfTokenizerJson, O200kSplitIsTheGpt4oFamily) {
  const std::string dir = testing::TempDir() + "/o200k";
  std::filesystem::create_directories(dir);
  const std::string kO200k =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  nlohmann::json vocab = nlohmann::json::object();
  for (const char* t : {"H", "e", "l", "o", "W", "r", "d", "He", "Hel", "Hell", "Hello", "Wo", "Wor", "Worl",
                        "World", "HelloWorld"})
    vocab[t] = static_cast<int>(vocab.size());
  const nlohmann::json j = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"H e", "He l", "Hel l", "Hell o", "W o", "Wo r", "Wor l", "Worl d", "Hello World"}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kO200k}}}, {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  auto md = LoadHfTokenizerJson(WriteTemp(dir, "tokenizer.json", j.dump()));
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_EQ(md->GetString("tokenizer.ggml.pre"), "gpt-4o");
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Encode("HelloWorld", false, false), std::vector<int32_t>({vocab["Hello"], vocab["World"]}));
}

// A toy SentencePiece-converted tokenizer.json: merge ranks decide the order, both merge forms,
// tokenizer_config.json overrides.
TEST(HfTokenizerJson, SynthesizedScoresFollowMergeRanks) {
  const std::string dir = testing::TempDir();
  const std::string vocab = R"({"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "▁": 4, "a": 5,
      "b": 6, "c": 7, "ab": 8, "bc": 9, "▁a": 10, "abc": 11})";
  auto make = [&](const std::string& merges) {
    return std::string(R"({"version": "1.0", "added_tokens": [
        {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
        {"id": 2, "content": "</s>", "special": true}, {"id": 12, "content": "<extra>", "special": false}],
      "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
      "pre_tokenizer": null,
      "post_processor": {"type": "TemplateProcessing", "single": [
        {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
      "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "vocab": )") +
           vocab + R"(, "merges": )" + merges + "}}";
  };
  // Ranks: bc 0, ab 1, ▁a 2, ab+c 3, a+bc 4 (both splits of "abc", adjacent as the converter does).
  const std::string as_strings = R"(["b c", "a b", "▁ a", "ab c", "a bc"])";
  const std::string as_arrays = R"([["b", "c"], ["a", "b"], ["▁", "a"], ["ab", "c"], ["a", "bc"]])";
  for (const std::string& merges : {as_strings, as_arrays}) {
    const std::string sub = dir + (merges == as_strings ? "/s" : "/a");
    std::filesystem::remove_all(sub);  // no tokenizer_config.json from an earlier run
    std::filesystem::create_directories(sub);
    auto md = LoadHfTokenizerJson(WriteTemp(sub, "tokenizer.json", make(merges)));
    ASSERT_TRUE(md.ok()) << md.status().ToString();
    auto scores = md->GetFloatArray("tokenizer.ggml.scores");
    ASSERT_TRUE(scores);
    ASSERT_EQ(scores->size(), 13u);  // id 12 comes from added_tokens only
    EXPECT_EQ((*scores)[9], 0.0f);   // bc
    EXPECT_EQ((*scores)[8], -1.0f);  // ab
    EXPECT_EQ((*scores)[10], -2.0f); // ▁a
    EXPECT_EQ((*scores)[11], -3.0f); // abc: its lowest rank
    EXPECT_LT((*scores)[5], -1e6f);  // 'a' is produced by no merge
    auto types = md->GetIntArray("tokenizer.ggml.token_type");
    EXPECT_EQ((*types)[0], static_cast<int64_t>(TokenType::kUnknown));
    EXPECT_EQ((*types)[1], static_cast<int64_t>(TokenType::kControl));
    EXPECT_EQ((*types)[3], static_cast<int64_t>(TokenType::kByte));
    EXPECT_EQ((*types)[12], static_cast<int64_t>(TokenType::kUserDefined));
    auto tok = Tokenizer::FromMetadata(*md);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    // HF: ▁ a b c -> (b,c) rank 0 -> ▁ a bc -> (▁,a) rank 2 -> ▁a bc [-> (▁a,bc) no merge].
    EXPECT_EQ(tok->Encode("abc", true, false), std::vector<int32_t>({1, 10, 9}));
    // "▁ab": (a,b) rank 1 then (▁,ab) no merge -> ▁ ab; then "cab": c a b -> c ab.
    EXPECT_EQ(tok->Encode("ab", false, false), std::vector<int32_t>({4, 8}));
    // 'A' falls back to its byte token; user-defined "<extra>" is matched even unparsed.
    EXPECT_EQ(tok->Encode("A<extra>", false, false), std::vector<int32_t>({4, 3, 12}));
  }
  // tokenizer_config.json beside it wins over the template.
  WriteTemp(dir + "/s", "tokenizer_config.json",
            R"({"add_bos_token": false, "add_eos_token": true, "eos_token": {"content": "</s>"}})");
  auto md = LoadHfTokenizerJson(dir + "/s/tokenizer.json");
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_EQ(md->GetBool("tokenizer.ggml.add_bos_token"), false);
  EXPECT_EQ(md->GetBool("tokenizer.ggml.add_eos_token"), true);
  auto tok = Tokenizer::FromMetadata(*md);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->Encode("abc", true, false), std::vector<int32_t>({10, 9, 2}));
}

TEST(HfTokenizerJson, Errors) {
  const std::string dir = testing::TempDir();
  EXPECT_EQ(LoadHfTokenizerJson(dir + "/nope.json").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadHfTokenizerJson(WriteTemp(dir, "bad.json", "{not json")).status().code(),
            StatusCode::kCorruptFile);
  EXPECT_EQ(LoadHfTokenizerJson(WriteTemp(dir, "nomodel.json", "{}")).status().code(),
            StatusCode::kCorruptFile);
  const char* wrong_types =
      R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": "zero"}, "merges": []}})";
  EXPECT_EQ(LoadHfTokenizerJson(WriteTemp(dir, "types.json", wrong_types)).status().code(),
            StatusCode::kCorruptFile);
  const char* bad_merge =
      R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": [7]}})";
  EXPECT_EQ(LoadHfTokenizerJson(WriteTemp(dir, "merge.json", bad_merge)).status().code(),
            StatusCode::kCorruptFile);
  const char* huge_id =
      R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 4000000000}, "merges": []}})";
  EXPECT_EQ(LoadHfTokenizerJson(WriteTemp(dir, "huge.json", huge_id)).status().code(),
            StatusCode::kCorruptFile);
  const char* unigram = R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})";
  auto st = LoadHfTokenizerJson(WriteTemp(dir, "unigram.json", unigram)).status();
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("Unigram"), std::string::npos);
}

}  // namespace
}  // namespace ferry
