// Byte-level BPE and WordPiece: special tokens, pieces, lossless round trips on random Unicode,
// streaming detokenization, pre-tokenizer edge cases, and the baichuan SPM variant.

#include <random>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace ferry {
namespace {

using testing::AssetPath;
using testing::GgufTokenizer;

constexpr const char* kGpt2 = "llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
constexpr const char* kBert = "llama.cpp-vocab/ggml-vocab-bert-bge.gguf";

// Random strings over ASCII, Latin-1, Greek, CJK, emoji, combining marks and whitespace kinds.
std::string RandomText(std::mt19937& rng, size_t max_chars) {
  static const uint32_t kPool[] = {'a',    'Z',     ' ',    ' ',    '\n',   '\t',     '\r',
                                   '\'',   's',     '1',    '7',    '.',    '!',      '$',
                                   0xA0,   0x85,    0xE9,   0x301,  0x3B1,  0x4E2D,   0x6587,
                                   0xAC00, 0x1F600, 0x200D, 0x3000, 0x2028, 0x10FFFF, 0xFFFD};
  std::string s;
  const size_t n = rng() % (max_chars + 1);
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp = (rng() % 4 == 0) ? (rng() % 0x3000) : kPool[rng() % std::size(kPool)];
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
    utf8::AppendCodepoint(s, cp);
  }
  return s;
}

TEST(BpeTokenizer, Gpt2FactsAndPieces) {
  FERRY_REQUIRE_ASSET(kGpt2);
  auto tok = GgufTokenizer(kGpt2);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->model_name(), "gpt2");
  EXPECT_EQ(tok->n_vocab(), 50257);
  EXPECT_EQ(tok->bos_id(), 50256);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->IsEog(50256));
  const std::vector<int32_t> ids = tok->Encode("Hello world", false, false);
  EXPECT_EQ(ids, std::vector<int32_t>({15496, 995}));
  EXPECT_EQ(tok->TokenText(995), "\xC4\xA0world");  // Ġworld
  EXPECT_EQ(tok->TokenToPiece(995), " world");
  EXPECT_EQ(tok->TokenToPiece(50256), "");
  EXPECT_EQ(tok->TokenToPiece(50256, true), "<|endoftext|>");
  // Special tokens: parsed only when asked, never split.
  EXPECT_EQ(tok->Encode("a<|endoftext|>b", false, true), std::vector<int32_t>({64, 50256, 65}));
  const std::vector<int32_t> plain = tok->Encode("a<|endoftext|>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(tok->Decode(plain), "a<|endoftext|>b");
  EXPECT_EQ(tok->Encode("", true, true), std::vector<int32_t>());
}

// Byte-level BPE is lossless: any text, with stray continuation bytes too, decodes back exactly,
// and the streaming detokenizer emits the sanitized text. (Bytes that never occur in UTF-8, such
// as 0xFF, have no token in some vocabularies, falcon's for one, and are dropped there.)
TEST(BpeTokenizer, RoundTripsRandomText) {
  struct Src {
    const char* name;
    bool from_encoder_files;
  };
  for (const Src& src :
       {Src{"gpt-2", false}, Src{"falcon", false}, Src{"deepseek-llm", false}, Src{"deepseek-coder", false},
        Src{"starcoder", false}, Src{"mpt", false}, Src{"llama3", true}}) {
    StatusOr<Tokenizer> tok = UnsupportedError("unset");
    if (src.from_encoder_files) {
      FERRY_REQUIRE_ASSET("llama3.2-bpe/encoder.json");
      auto md =
          LoadGpt2EncoderFiles(AssetPath("llama3.2-bpe/encoder.json"), AssetPath("llama3.2-bpe/vocab.bpe"));
      ASSERT_TRUE(md.ok());
      tok = Tokenizer::FromMetadata(*md);
    } else {
      const std::string rel = std::string("llama.cpp-vocab/ggml-vocab-") + src.name + ".gguf";
      FERRY_REQUIRE_ASSET(rel);
      tok = GgufTokenizer(rel);
    }
    ASSERT_TRUE(tok.ok()) << src.name << ": " << tok.status().ToString();
    std::mt19937 rng(1234);
    int skipped = 0;
    for (int trial = 0; trial < 300; ++trial) {
      std::string text = RandomText(rng, 40);
      if (trial % 10 == 0 && !text.empty())
        text[rng() % text.size()] = static_cast<char>(0x80 | (rng() & 0x3F));  // ill-formed
      const std::vector<int32_t> ids = tok->Encode(text, false, false);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << src.name;
      bool every_byte_has_a_token = true;
      for (char c : text)
        every_byte_has_a_token &= tok->TokenId(unicode::ByteToChar(static_cast<uint8_t>(c))) >= 0;
      if (!every_byte_has_a_token) {
        ++skipped;
        continue;
      }
      ASSERT_EQ(tok->Decode(ids), text) << src.name << " trial " << trial;
      IncrementalDetokenizer detok(*tok);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.Push(id);
      streamed += detok.Flush();
      ASSERT_EQ(streamed, utf8::Sanitize(text)) << src.name;
    }
    // Only falcon's vocabulary lacks byte characters (C0 controls among them).
    if (std::string(src.name) != "falcon") {
      EXPECT_EQ(skipped, 0) << src.name;
    }
    EXPECT_LT(skipped, 150) << src.name;
  }
}

TEST(BpeTokenizer, LongWhitespaceRunsAndRepeats) {
  FERRY_REQUIRE_ASSET(kGpt2);
  auto tok = GgufTokenizer(kGpt2);
  ASSERT_TRUE(tok.ok());
  for (const std::string& text : {std::string(100000, ' '), std::string(50000, 'a'),
                                  std::string(20000, '\n') + "x", std::string(30000, '!')}) {
    const std::vector<int32_t> ids = tok->Encode(text, false, false);
    EXPECT_EQ(tok->Decode(ids), text);
  }
}

// Byte-level BPE is lossless on a whole real-world file. Its speed is a benchmark
// (bench/tokenizer_bench.cc, docs/benchmarks.md), never a pass/fail test.
TEST(BpeTokenizer, WikitextRoundTripsLosslessly) {
  const char* kText = "eval-text/wiki.test.raw";
  FERRY_REQUIRE_ASSET(kGpt2);
  FERRY_REQUIRE_ASSET(kText);
  auto tok = GgufTokenizer(kGpt2);
  ASSERT_TRUE(tok.ok());
  const std::string text = testing::ReadFileOrEmpty(AssetPath(kText));
  ASSERT_FALSE(text.empty());
  const std::vector<int32_t> ids = tok->Encode(text, false, false);
  EXPECT_EQ(tok->Decode(ids), text);
}

TEST(PreTokenizer, KnownFamiliesCompileAndUnknownIsUnsupported) {
  for (const char* pre :
       {"default", "", "gpt-2", "llama3", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon",
        "mpt", "starcoder", "refact", "bloom", "viking", "tekken", "gpt-4o", "command-r", "smollm"}) {
    auto pt = PreTokenizer::ForType(pre);
    ASSERT_TRUE(pt.ok()) << pre << ": " << pt.status().ToString();
    std::vector<PreTokenizer::Piece> pieces;
    const std::string text = "Hello, y'all! 12345 \xE4\xBD\xA0\xE5\xA5\xBD  \n\n x";
    pt->Split(text, pieces);
    uint32_t at = 0;
    for (const auto& p : pieces) {
      EXPECT_EQ(p.first, at) << pre;
      EXPECT_LT(p.first, p.second) << pre;
      at = p.second;
    }
    EXPECT_EQ(at, text.size()) << pre;
  }
  EXPECT_EQ(PreTokenizer::ForType("no-such-pre").status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(PreTokenizer::FromPatterns({"(unclosed"}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PreTokenizer, Llama3Splits) {
  auto pt = PreTokenizer::ForType("llama3");
  ASSERT_TRUE(pt.ok());
  auto split = [&](const std::string& text) {
    std::vector<PreTokenizer::Piece> pieces;
    pt->Split(text, pieces);
    std::vector<std::string> out;
    for (auto& p : pieces) out.push_back(text.substr(p.first, p.second - p.first));
    return out;
  };
  EXPECT_EQ(split("I'M 12345 ok\n\n  x"),
            std::vector<std::string>({"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " x"}));
  // U+0085 (NEL) is White_Space for llama.cpp and HF, unlike PCRE2's own \s.
  EXPECT_EQ(split("a\xC2\x85\xC2\x85"
                  "b"),
            std::vector<std::string>({"a", "\xC2\x85",
                                      "\xC2\x85"
                                      "b"}));
}

// Families without a llama.cpp vocabulary among the assets, split by hand from their regexes
// (llama.cpp's llama-vocab.cpp / the models' tokenizer.json): one string exercising case runs
// (gpt-4o and tekken split "HelloWorld"), contractions (gpt-4o keeps " I'M" whole, tekken
// splits it), digit runs (single digits vs {1,3}), punctuation before a letter, and newlines.
// bloom's single pattern leaves unmatched bytes ("\n\n ") as their own piece; viking then
// splits digits out of bloom's pieces.
TEST(PreTokenizer, FamiliesSplitAsTheirRegexesSay) {
  const std::string text = "HelloWorld I'M 12345 a/b\n\n  x";
  using V = std::vector<std::string>;
  const std::vector<std::pair<const char*, V>> cases = {
      {"qwen2", {"HelloWorld", " I", "'M", " ", "1", "2", "3", "4", "5", " a", "/b", "\n\n", " ", " x"}},
      {"llama3", {"HelloWorld", " I", "'M", " ", "123", "45", " a", "/b", "\n\n", " ", " x"}},
      {"gpt-4o", {"Hello", "World", " I'M", " ", "123", "45", " a", "/b", "\n\n", " ", " x"}},
      {"tekken", {"Hello", "World", " I", "'M", " ", "1", "2", "3", "4", "5", " a", "/b", "\n\n", " ", " x"}},
      {"bloom", {"HelloWorld", " I'M", " 12345", " a/b", "\n\n ", " x"}},
      {"viking", {"HelloWorld", " I'M", " ", "1", "2", "3", "4", "5", " a/b", "\n\n ", " x"}},
  };
  for (const auto& [pre, want] : cases) {
    auto pt = PreTokenizer::ForType(pre);
    ASSERT_TRUE(pt.ok()) << pre;
    std::vector<PreTokenizer::Piece> pieces;
    pt->Split(text, pieces);
    V got;
    for (const auto& p : pieces) got.push_back(text.substr(p.first, p.second - p.first));
    EXPECT_EQ(got, want) << pre;
  }
}

TEST(WordPieceTokenizer, BertFactsSpecialsAndPieces) {
  FERRY_REQUIRE_ASSET(kBert);
  auto tok = GgufTokenizer(kBert);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->model_name(), "bert");
  EXPECT_EQ(tok->bos_id(), 101);  // [CLS]
  EXPECT_EQ(tok->eos_id(), 102);  // [SEP]
  EXPECT_EQ(tok->unk_id(), 100);
  const std::vector<int32_t> ids = tok->Encode("Hello World!", true, false);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.front(), 101);
  EXPECT_EQ(ids.back(), 102);
  EXPECT_EQ(tok->Decode(ids), " hello world !");
  EXPECT_EQ(tok->Encode("[CLS] hi [SEP]", false, true).front(), 101);
  // Accents go, case goes, CJK ideographs are words of their own; unknown words become [UNK].
  EXPECT_EQ(tok->Encode("\xC3\x84pfel", false, false), tok->Encode("apfel", false, false));
  EXPECT_EQ(tok->Encode("\xF0\x9F\x98\x80", false, false), std::vector<int32_t>({100}));
}

TEST(SpmTokenizer, BaichuanLoadsAndEncodes) {
  const char* kBaichuan = "llama.cpp-vocab/ggml-vocab-baichuan.gguf";
  FERRY_REQUIRE_ASSET(kBaichuan);
  auto tok = GgufTokenizer(kBaichuan);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->n_vocab(), 64000);
  for (const std::string text :
       {"Hello world", "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
        "def f(x):\n    return x * 2\n"}) {
    const std::vector<int32_t> ids = tok->Encode(text, true, false);
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids[0], 1);
    EXPECT_LT(ids.size(), text.size() + 2);  // merges happen
    EXPECT_EQ(tok->Decode(ids), " " + text);
  }
}

}  // namespace
}  // namespace ferry
