#include <random>

#include "constraint/constraint.h"
#include "constraint/matcher.h"
#include "constraint_test_util.h"

namespace ferry::constraint {
namespace {

// Allowed tokens by brute force: try every vocabulary token on the matcher.
std::vector<uint64_t> BruteForceMask(Matcher& m) {
  std::vector<uint64_t> mask(m.mask_words(), 0);
  for (int32_t t = 0; t < m.grammar().vocab().size(); ++t) {
    if (m.AcceptToken(t)) {
      mask[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
      m.Rollback(1);
    }
  }
  return mask;
}

std::vector<int32_t> Allowed(const std::vector<uint64_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w)
    for (int b = 0; b < 64; ++b)
      if ((mask[w] >> b) & 1) out.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(b)));
  return out;
}

// Random walks through several grammars on the Llama 3 vocabulary: at every step the fast
// mask equals the brute-force one, and the walk takes an allowed token.
TEST(Mask, EqualsBruteForceOnLlama3Vocabulary) {
  auto vocab = testing::Llama3Vocab();
  if (!vocab) GTEST_SKIP() << "llama3.2-bpe not in FERRY_ASSETS";
  std::vector<ConstraintSpec> specs(5);
  specs[0].kind = ConstraintSpec::Kind::kJsonSchema;
  specs[0].text =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer","minimum":-50,"maximum":1000},
      "tags":{"type":"array","items":{"enum":["a b","c\"d"]}},"ok":{"type":"boolean"}},"required":["name","n"],"additionalProperties":false})";
  specs[1].kind = ConstraintSpec::Kind::kJsonValue;
  specs[2].kind = ConstraintSpec::Kind::kRegex;
  specs[2].text = "(\\d{3}-)?[a-z]+( [a-z]+)*\\.";
  specs[3].kind = ConstraintSpec::Kind::kGbnf;
  specs[3].text = "root ::= \"<\" item (\",\" item)* \">\"\nitem ::= [0-9]+ | \"é\" [^<>]{0,3}\n";
  specs[4].kind = ConstraintSpec::Kind::kChoice;
  specs[4].choices = {"positive", "negative", "neutral", "pos"};
  GrammarCache cache(vocab);
  std::mt19937 rng(11);
  for (const ConstraintSpec& spec : specs) {
    SCOPED_TRACE(spec.text);
    auto g = cache.Get(spec);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (int walk = 0; walk < 3; ++walk) {
      Matcher m(*g);
      std::vector<uint64_t> mask(m.mask_words());
      for (int step = 0; step < 24 && !m.terminated(); ++step) {
        m.FillMask(mask);
        std::vector<uint64_t> brute = BruteForceMask(m);
        ASSERT_EQ(Allowed(mask), Allowed(brute)) << "step " << step;
        std::vector<int32_t> allowed = Allowed(mask);
        ASSERT_FALSE(allowed.empty());
        // Prefer longer tokens now and then so walks get deep into the grammar.
        int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.AcceptToken(pick));
        ASSERT_EQ(vocab->IsEnd(pick), m.terminated());
      }
    }
  }
}

TEST(Mask, EndTokensOnlyWhereTheGrammarMayEnd) {
  std::vector<std::string> bytes = {"a", "b", "ab", "", "<0x0A>"};
  auto vocab = std::make_shared<const TokenVocabulary>(bytes, std::vector<int32_t>{3});
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kRegex;
  spec.text = "a+b?";
  GrammarCache cache(vocab);
  auto g = cache.Get(spec);
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  std::vector<uint64_t> mask(1);
  m.FillMask(mask);
  EXPECT_EQ(mask[0], 0b00101u);  // a, ab; not b, not the end token
  ASSERT_TRUE(m.AcceptToken(0));
  m.FillMask(mask);
  EXPECT_EQ(mask[0], 0b01111u);  // a, b, ab, end
  ASSERT_TRUE(m.AcceptToken(1));
  m.FillMask(mask);
  EXPECT_EQ(mask[0], 0b01000u);  // only the end
  EXPECT_FALSE(m.AcceptToken(0));
  EXPECT_EQ(m.num_tokens(), 2);
  m.Rollback(1);  // back to "a": b allowed again
  EXPECT_TRUE(m.AcceptToken(2));
  ASSERT_TRUE(m.AcceptToken(3));
  EXPECT_TRUE(m.terminated());
  m.FillMask(mask);
  EXPECT_EQ(mask[0], 0u);
}

TEST(Mask, CacheSharesCompiledGrammarsAndEvicts) {
  auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"x"}, std::vector<int32_t>{});
  GrammarCache cache(vocab, 2);
  ConstraintSpec a, b, c;
  a.kind = b.kind = c.kind = ConstraintSpec::Kind::kRegex;
  // (assign: GCC 12 -O3 warns falsely on operator= from a one-character literal)
  a.text.assign(1, 'a');
  b.text.assign(1, 'b');
  c.text.assign(1, 'c');
  auto ga = *cache.Get(a);
  EXPECT_EQ(ga.get(), cache.Get(a)->get());
  auto gb = *cache.Get(b);
  auto gc = *cache.Get(c);  // evicts a (least recently used)
  EXPECT_EQ(gc.get(), cache.Get(c)->get());
  EXPECT_NE(ga.get(), cache.Get(a)->get());
  ConstraintSpec bad;
  bad.kind = ConstraintSpec::Kind::kGbnf;
  bad.text = "root ::= (";
  EXPECT_FALSE(cache.Get(bad).ok());
}

}  // namespace
}  // namespace ferry::constraint
