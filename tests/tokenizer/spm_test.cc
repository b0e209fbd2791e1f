// SPM tokenizer: llama.cpp conformance vectors, golden prompt ids, special tokens, speed.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer_test_util.h"

namespace ferry {
namespace {

using testing::AssetPath;
using testing::GgufTokenizer;
using testing::ReadVocabCases;
using testing::RunVocabCases;

// llama.cpp's SentencePiece algorithm as written there (llm_tokenizer_spm): the whole escaped
// text in one priority queue of adjacent pairs, best score first (ties: leftmost), merged while
// the merge is in the vocabulary; symbols left outside it fall back to <0xXX> byte tokens.
// Written for the test, independent of Ferry's chunked encoder.
std::vector<int32_t> SingleQueueSpm(const Tokenizer& tok, const std::vector<float>& scores,
                                    std::string text) {
  std::string escaped = "\xE2\x96\x81";  // the space prefix, then every ' ' as U+2581
  for (char c : text) escaped += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  struct Symbol {
    int32_t prev, next;
    size_t start, n;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < escaped.size();) {
    const unsigned char c = static_cast<unsigned char>(escaped[i]);
    const size_t len = std::min<size_t>(c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4, escaped.size() - i);
    sym.push_back({static_cast<int32_t>(sym.size()) - 1, static_cast<int32_t>(sym.size()) + 1, i, len});
    i += len;
  }
  if (!sym.empty()) sym.back().next = -1;
  struct Pair {
    int32_t left, right;
    float score;
    size_t size;
  };
  auto worse = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  auto add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const size_t size = sym[static_cast<size_t>(l)].n + sym[static_cast<size_t>(r)].n;
    const int32_t id = tok.TokenId(escaped.substr(sym[static_cast<size_t>(l)].start, size));
    if (id >= 0) queue.push({l, r, scores[static_cast<size_t>(id)], size});
  };
  for (size_t i = 1; i < sym.size(); ++i) add(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[static_cast<size_t>(p.left)];
    Symbol& r = sym[static_cast<size_t>(p.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != p.size) continue;  // a stale pair
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = p.left;
    add(l.prev, p.left);
    add(p.left, l.next);
  }
  std::vector<int32_t> ids = {tok.bos_id()};
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const std::string piece =
        escaped.substr(sym[static_cast<size_t>(i)].start, sym[static_cast<size_t>(i)].n);
    if (const int32_t id = tok.TokenId(piece); id >= 0) {
      ids.push_back(id);
      continue;
    }
    for (unsigned char b : piece) ids.push_back(tok.TokenId(fmt::format("<0x{:02X}>", b)));
  }
  return ids;
}

constexpr const char* kLlamaSpm = "llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
constexpr const char* kPhi3 = "llama.cpp-vocab/ggml-vocab-phi-3.gguf";

TEST(SpmTokenizer, LlamaSpmConformance) {
  FERRY_REQUIRE_ASSET(kLlamaSpm);
  auto tok = GgufTokenizer(kLlamaSpm);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto cases = ReadVocabCases(kLlamaSpm);
  ASSERT_GE(cases.size(), 40u);
  EXPECT_EQ(RunVocabCases("llama-spm", *tok, cases), 0);
}

TEST(SpmTokenizer, Phi3Conformance) {
  FERRY_REQUIRE_ASSET(kPhi3);
  auto tok = GgufTokenizer(kPhi3);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto cases = ReadVocabCases(kPhi3);
  ASSERT_GE(cases.size(), 40u);
  EXPECT_EQ(RunVocabCases("phi-3", *tok, cases), 0);
}

TEST(SpmTokenizer, VocabFacts) {
  FERRY_REQUIRE_ASSET(kLlamaSpm);
  auto tok = GgufTokenizer(kLlamaSpm);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_TRUE(tok->IsEog(2));
  EXPECT_FALSE(tok->IsEog(1));
  EXPECT_EQ(tok->GetTokenType(0), TokenType::kUnknown);
  EXPECT_EQ(tok->GetTokenType(1), TokenType::kControl);
  EXPECT_EQ(tok->GetTokenType(13), TokenType::kByte);
  EXPECT_EQ(tok->TokenText(13), "<0x0A>");
  EXPECT_EQ(tok->TokenId("<0x0A>"), 13);
  // Pieces: byte tokens give their byte, '▁' gives ' ', control tokens give "" unless rendered.
  EXPECT_EQ(tok->TokenToPiece(13), "\n");
  EXPECT_EQ(tok->TokenToPiece(1), "");
  EXPECT_EQ(tok->TokenToPiece(1, /*render_special=*/true), "<s>");
  EXPECT_EQ(tok->TokenToPiece(0), "");
  EXPECT_EQ(tok->TokenToPiece(tok->TokenId("\xE2\x96\x81the")), " the");
  // Ids out of range never crash.
  EXPECT_EQ(tok->TokenToPiece(-1), "");
  EXPECT_EQ(tok->TokenToPiece(32000), "");
  EXPECT_EQ(tok->TokenText(1 << 30), "");
  EXPECT_EQ(tok->GetTokenType(-5), TokenType::kUndefined);
  EXPECT_FALSE(tok->IsEog(-1));
}

TEST(SpmTokenizer, AddSpecialAndEmptyText) {
  FERRY_REQUIRE_ASSET(kLlamaSpm);
  auto tok = GgufTokenizer(kLlamaSpm);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->Encode("", true, true), std::vector<int32_t>({1}));
  EXPECT_EQ(tok->Encode("", false, true), std::vector<int32_t>());
  EXPECT_EQ(tok->Encode("Hello world", true, false),
            std::vector<int32_t>({1, 15043, 3186}));
}

TEST(SpmTokenizer, SpecialTokenParsing) {
  FERRY_REQUIRE_ASSET(kLlamaSpm);
  auto tok = GgufTokenizer(kLlamaSpm);
  ASSERT_TRUE(tok.ok());
  const std::vector<int32_t> hello = tok->Encode("Hello", false, false);  // ▁Hello
  ASSERT_EQ(hello.size(), 1u);
  // Parsed: "<s>" is the BOS id, and the text after a special token gets the space prefix again
  // (llama.cpp: is_prev_special).
  std::vector<int32_t> got = tok->Encode("<s>Hello</s>", false, true);
  EXPECT_EQ(got, std::vector<int32_t>({1, hello[0], 2}));
  // Not parsed: the control token text is split like any text.
  got = tok->Encode("<s>Hello", false, false);
  EXPECT_GT(got.size(), 2u);
  EXPECT_EQ(std::count(got.begin(), got.end(), 1), 0);
  EXPECT_EQ(tok->Decode(got), " <s>Hello");
  // <unk> is matched only when parsing specials.
  EXPECT_EQ(tok->Encode("<unk>", false, true), std::vector<int32_t>({0}));
}

// Phi-3 (general.name "Phi3"): llama.cpp marks its special tokens rstrip, so the newline after
// <|user|> / <|end|> is swallowed, and text after a special token gets the space prefix again.
TEST(SpmTokenizer, Phi3ChatSpecialTokens) {
  FERRY_REQUIRE_ASSET(kPhi3);
  auto tok = GgufTokenizer(kPhi3);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->eos_id(), 32000);
  EXPECT_TRUE(tok->IsEog(32000));  // <|endoftext|>
  EXPECT_TRUE(tok->IsEog(32007));  // <|end|>
  const int32_t hello = tok->TokenId("\xE2\x96\x81Hello");
  ASSERT_GE(hello, 0);
  EXPECT_EQ(tok->Encode("<|user|>\nHello<|end|>\n<|assistant|>", true, true),
            std::vector<int32_t>({1, 32010, hello, 32007, 32001}));
}

// Golden prompt ids produced by llama.cpp (BOS added, special tokens parsed).
void CheckGoldenPrompts(const std::string& golden_rel, const Tokenizer& tok) {
  std::istringstream lines(testing::ReadFileOrEmpty(AssetPath(golden_rel)));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    const std::string prompt = j["prompt"].get<std::string>();
    const std::vector<int32_t> want = j["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.Encode(prompt, /*add_special=*/true, /*parse_special=*/true), want)
        << golden_rel << ": '" << prompt << "'";
    ++n;
  }
  EXPECT_GT(n, 0) << golden_rel;
  std::printf("%s: %d prompts checked\n", golden_rel.c_str(), n);
}

TEST(SpmTokenizer, GoldenPromptsStories260K) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  FERRY_REQUIRE_ASSET("golden/stories260K-greedy.jsonl");
  auto tok = GgufTokenizer("stories260K.gguf");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Encode("Once upon a time", true, true),
            std::vector<int32_t>({1, 403, 407, 261, 378}));
  CheckGoldenPrompts("golden/stories260K-greedy.jsonl", *tok);
}

TEST(SpmTokenizer, GoldenPromptsLlama2TinyRandom) {
  FERRY_REQUIRE_ASSET("random-weights/llama-2-tiny-random.gguf");
  FERRY_REQUIRE_ASSET("golden/llama-2-tiny-random-greedy.jsonl");
  auto tok = GgufTokenizer("random-weights/llama-2-tiny-random.gguf");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Encode("The quick brown fox jumps over the lazy dog", true, true),
            std::vector<int32_t>({1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366,
                                  11203}));
  CheckGoldenPrompts("golden/llama-2-tiny-random-greedy.jsonl", *tok);
}

TEST(SpmTokenizer, GoldenGeneratedTextIsConcatenatedPieces) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  FERRY_REQUIRE_ASSET("golden/stories260K-greedy.jsonl");
  auto tok = GgufTokenizer("stories260K.gguf");
  ASSERT_TRUE(tok.ok());
  std::istringstream lines(testing::ReadFileOrEmpty(AssetPath("golden/stories260K-greedy.jsonl")));
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("generated_text")) continue;
    EXPECT_EQ(tok->Decode(j["generated_ids"].get<std::vector<int32_t>>()),
              j["generated_text"].get<std::string>());
  }
}

// Lossless (but for the space prefix) on a whole real-world file. Speed is a benchmark
// (bench/tokenizer_bench.cc, docs/benchmarks.md), never a pass/fail test.
TEST(SpmTokenizer, WikitextRoundTripsAndChunkingIsExact) {
  const char* kText = "eval-text/wiki.test.raw";
  FERRY_REQUIRE_ASSET(kLlamaSpm);
  FERRY_REQUIRE_ASSET(kText);
  auto tok = GgufTokenizer(kLlamaSpm);
  ASSERT_TRUE(tok.ok());
  const std::string text = testing::ReadFileOrEmpty(AssetPath(kText));
  ASSERT_FALSE(text.empty());
  std::vector<int32_t> ids = tok->Encode(text, true, false);
  EXPECT_EQ(tok->Decode(ids), " " + text);  // lossless but for the space prefix
  // The chunked encoder equals llama.cpp's single-queue algorithm, on a slice large enough to
  // hold every kind of chunk boundary (newlines, digits, punctuation, byte fallbacks).
  auto md = testing::GgufMetadata(kLlamaSpm);
  ASSERT_TRUE(md.ok());
  const std::optional<std::vector<float>> scores = md->GetFloatArray("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.has_value());
  const std::string slice = text.substr(0, 200000);
  EXPECT_EQ(tok->Encode(slice, true, false), SingleQueueSpm(*tok, *scores, slice));
}

TEST(SpmTokenizer, FromMetadataErrors) {
  Metadata md;
  EXPECT_EQ(Tokenizer::FromMetadata(md).status().code(), StatusCode::kNotFound);
  md.SetString("tokenizer.ggml.model", "t5");
  md.SetStringArray("tokenizer.ggml.tokens", {"a", "b"});
  auto st = Tokenizer::FromMetadata(md).status();
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("t5"), std::string::npos);
  md.SetString("tokenizer.ggml.model", "llama");
  md.SetFloatArray("tokenizer.ggml.scores", {0.0f});  // shorter than tokens
  EXPECT_EQ(Tokenizer::FromMetadata(md).status().code(), StatusCode::kCorruptFile);
  md.SetFloatArray("tokenizer.ggml.scores", {0.0f, 0.0f});
  md.SetStringArray("tokenizer.ggml.tokens", {"a", "a"});
  EXPECT_EQ(Tokenizer::FromMetadata(md).status().code(), StatusCode::kCorruptFile);
  md.SetString("tokenizer.ggml.tokens", "not an array");
  EXPECT_EQ(Tokenizer::FromMetadata(md).status().code(), StatusCode::kCorruptFile);
}

// A hand-made vocabulary: merge order by score, ties to the left, byte fallback, unk.
TEST(SpmTokenizer, TinyVocabMergeOrder) {
  Metadata md;
  md.SetString("tokenizer.ggml.model", "llama");
  //                 0        1      2       3         4    5    6    7     8     9
  md.SetStringArray("tokenizer.ggml.tokens",
                    {"<unk>", "<s>", "</s>", "<0x41>", "a", "b", "c", "ab", "bc", "\xE2\x96\x81"});
  md.SetFloatArray("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -1, -1, -5, -3, -1});
  md.SetIntArray("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1, 1, 1});
  md.SetBool("tokenizer.ggml.add_space_prefix", false);
  auto tok = Tokenizer::FromMetadata(md);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // "bc" (-3) beats "ab" (-5).
  EXPECT_EQ(tok->Encode("abc", false, false), std::vector<int32_t>({4, 8}));
  EXPECT_EQ(tok->Encode("abab", false, false), std::vector<int32_t>({7, 7}));
  // 'A' has a byte token; 'Z' has none, so it becomes <unk>; ' ' is '▁'.
  EXPECT_EQ(tok->Encode("A Z", false, false), std::vector<int32_t>({3, 9, 0}));
  EXPECT_FALSE(tok->add_space_prefix());
  // Equal scores: the left pair wins.
  md.SetFloatArray("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -1, -1, -3, -3, -1});
  auto tied = Tokenizer::FromMetadata(md);
  ASSERT_TRUE(tied.ok());
  EXPECT_EQ(tied->Encode("abc", false, false), std::vector<int32_t>({7, 6}));
}

}  // namespace
}  // namespace ferry
