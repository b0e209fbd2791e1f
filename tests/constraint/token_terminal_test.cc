// Token terminals (GBNF <[id]>, <text>, !<...>): a grammar position that takes one whole
// token by id, so control tokens ([TOOL_CALLS], <|channel|>) can be forced and a thinking
// block can run until its closing token.
#include <random>

#include "constraint/constraint.h"
#include "constraint/gbnf_parser.h"
#include "constraint/matcher.h"
#include "constraint_test_util.h"
#include "tool_calls/tool_grammar.h"

namespace ferry::constraint {
namespace {

// ids: 0 "a", 1 "b", 2 "<think>" (a text token), 3 "</think>", 4 "a<think>", 5 [TC] (control:
// no bytes), 6 end, 7 unused (neither bytes nor text), 8 "x"
std::shared_ptr<const TokenVocabulary> ToyVocab() {
  std::vector<std::string> bytes = {"a", "b", "<think>", "</think>", "a<think>", "", "", "", "x"};
  std::vector<std::string> specials(bytes.size());
  specials[5] = "[TC]";
  specials[6] = "<end>";
  return std::make_shared<const TokenVocabulary>(bytes, std::vector<int32_t>{6}, specials);
}

std::vector<int32_t> Allowed(Matcher& m) {
  std::vector<uint64_t> mask(m.mask_words());
  m.FillMask(mask);
  std::vector<int32_t> out;
  for (int32_t t = 0; t < m.grammar().vocab().size(); ++t)
    if ((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) out.push_back(t);
  return out;
}

// Every token the matcher takes from here, by trying each one.
std::vector<int32_t> BruteForce(Matcher& m) {
  std::vector<int32_t> out;
  for (int32_t t = 0; t < m.grammar().vocab().size(); ++t)
    if (m.AcceptToken(t)) {
      out.push_back(t);
      m.Rollback(1);
    }
  return out;
}

StatusOr<std::shared_ptr<const CompiledGrammar>> Gbnf(const std::string& text,
                                                      std::shared_ptr<const TokenVocabulary> vocab) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kGbnf;
  spec.text = text;
  GrammarCache cache(std::move(vocab));
  return cache.Get(spec);
}

TEST(TokenTerminal, ByIdTakesOnlyThatTokenWhole) {
  auto g = Gbnf("root ::= <[5]> \"a\"+ | \"b\" <think> \"x\"\n", ToyVocab());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{1, 5}));  // the control token by id, or "b"
  ASSERT_TRUE(m.AcceptToken(5));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0}));
  m.Rollback(1);
  ASSERT_TRUE(m.AcceptToken(1));
  // <think> by text is token 2 only: neither its bytes spelled by other tokens nor a token
  // that carries them after other bytes.
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{2}));
  EXPECT_FALSE(m.AcceptToken(4));
  ASSERT_TRUE(m.AcceptToken(2));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{8}));
  ASSERT_TRUE(m.AcceptToken(8));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{6}));
}

TEST(TokenTerminal, NegatedTakesAnyOtherProducibleToken) {
  auto g = Gbnf("root ::= <think> think </think> \"x\"\nthink ::= !</think>*\n", ToyVocab());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  ASSERT_TRUE(m.AcceptToken(2));
  // Anything but </think>, the end token and the unused token; control tokens included.
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 8}));
  ASSERT_TRUE(m.AcceptToken(5));
  ASSERT_TRUE(m.AcceptToken(4));
  ASSERT_TRUE(m.AcceptToken(3));  // </think>: the closing terminal, not the negation
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{8}));
}

TEST(TokenTerminal, EndTokenNamedByAGrammarIsTakenThere) {
  auto g = Gbnf("root ::= \"a\" <end> \"b\"\n", ToyVocab());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{6}));
  ASSERT_TRUE(m.AcceptToken(6));
  EXPECT_FALSE(m.terminated());  // the grammar asked for it: it goes on
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{1}));
  ASSERT_TRUE(m.AcceptToken(1));
  ASSERT_TRUE(m.AcceptToken(6));  // here the grammar may end: the end token ends it
  EXPECT_TRUE(m.terminated());
}

// Random walks over grammars mixing byte and token terminals: the mask always equals trying
// every token.
TEST(TokenTerminal, MasksEqualBruteForceOnRandomWalks) {
  const std::vector<std::string> grammars = {
      "root ::= (<[5]> | \"a\" | <think> b)* \"x\"\nb ::= !</think>{0,2} </think>\n",
      "root ::= \"a\"? (<[5]> \"b\" | \"ab\" | !<[0]>) root?\n",
      "root ::= (\"a<think>\" | \"a\" <think>) [ab]* <[3]>\n",
  };
  std::mt19937 rng(5);
  for (const std::string& text : grammars) {
    SCOPED_TRACE(text);
    auto g = Gbnf(text, ToyVocab());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (int walk = 0; walk < 20; ++walk) {
      Matcher m(*g);
      for (int step = 0; step < 12 && !m.terminated(); ++step) {
        std::vector<int32_t> allowed = Allowed(m);
        ASSERT_EQ(allowed, BruteForce(m)) << "walk " << walk << " step " << step;
        if (allowed.empty()) break;
        ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
      }
    }
  }
}

TEST(TokenTerminal, MasksEqualBruteForceOnLlama3Vocabulary) {
  auto vocab = testing::Llama3Vocab();
  if (!vocab) GTEST_SKIP() << "llama3.2-bpe not in FERRY_ASSETS";
  // Token 1000 / 1001 by id among text, a negation over the whole vocabulary.
  auto g = Gbnf("root ::= \"{\" (<[1000]> | [a-z]+)? !<[1001]>{1,3} <[1001]> \"}\"\n", vocab);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::mt19937 rng(3);
  for (int walk = 0; walk < 3; ++walk) {
    Matcher m(*g);
    for (int step = 0; step < 8 && !m.terminated(); ++step) {
      std::vector<int32_t> allowed = Allowed(m);
      ASSERT_EQ(allowed, BruteForce(m)) << "step " << step;
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(TokenTerminal, ErrorsNameTheToken) {
  auto unknown = Gbnf("root ::= <nothink>\n", ToyVocab());
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("<nothink>"), std::string::npos) << unknown.status().ToString();
  auto outside = Gbnf("root ::= !<[99]>\n", ToyVocab());
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("!<[99]> is outside"), std::string::npos)
      << outside.status().ToString();
  for (const char* bad : {"root ::= <[x]>\n", "root ::= <[12\n", "root ::= <abc\n", "root ::= <>\n"}) {
    auto g = ParseGbnf(bad);
    EXPECT_FALSE(g.ok()) << bad;
  }
  EXPECT_NE(ParseGbnf("root ::= <[1]\n").status().message().find("']>'"), std::string::npos);
}

// A forced tool call in a format whose markers are the model's special tokens emits those
// tokens, not their text spelled out of ordinary ones.
TEST(TokenTerminal, ToolCallGrammarForcesTheMarkerTokens) {
  // 0 "[", 1 "]", 2 "{", ... the bytes of a Mistral v3 call; 5 [TOOL_CALLS] is a control token.
  std::vector<std::string> bytes = {"[",       "]",     "{\"name\": \"f\", \"arguments\": ",
                                    "}",       "[TOOL", "",
                                    "_CALLS]", "",      "{",
                                    "\"",      "a",     ":",
                                    " ",       "1",     ","};
  std::vector<std::string> specials(bytes.size());
  specials[5] = "[TOOL_CALLS]";
  auto vocab = std::make_shared<const TokenVocabulary>(bytes, std::vector<int32_t>{7}, specials);
  tool_calls::ToolDef f{"f", "", nlohmann::ordered_json::parse(R"({"type": "object"})")};
  const std::string gbnf =
      tool_calls::ToolCallGbnf(tool_calls::ToolFormat::kMistralV3, {f}, false, false, vocab.get());
  EXPECT_NE(gbnf.find("<[5]>"), std::string::npos) << gbnf;
  auto spec = tool_calls::ToolCallGrammar(tool_calls::ToolFormat::kMistralV3, {f}, false, false, vocab.get());
  GrammarCache cache(vocab);
  auto g = cache.Get(spec);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{5}));  // not "[TOOL" + "_CALLS]"
  for (int32_t t : {5, 0, 2, 8, 3, 3, 1}) ASSERT_TRUE(m.AcceptToken(t)) << t;
  EXPECT_TRUE(m.CanEnd());
  // Without the vocabulary the markers stay text.
  EXPECT_EQ(tool_calls::ToolCallGbnf(tool_calls::ToolFormat::kMistralV3, {f}, false).find("<["),
            std::string::npos);
}

}  // namespace
}  // namespace ferry::constraint
