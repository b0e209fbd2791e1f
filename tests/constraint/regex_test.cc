#include <random>
#include <regex>

#include "constraint/regex_compiler.h"
#include "constraint_test_util.h"

namespace ferry::constraint {
namespace {

using testing::FullMatch;
using testing::MustLower;

// Every pattern against std::regex (ECMAScript) on random strings over an alphabet that
// hits its literals: the grammar accepts exactly the strings std::regex_match accepts.
TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "abc",
      "a|b|cd",
      "(ab)*c",
      "a+b?c*",
      "[a-c]{2,3}",
      "[^ab]x",
      "(?:ab|a)(bc|c)",
      "\\d{3}-\\d{2}",
      "\\w+\\s\\W?",
      "a.b",
      "(a|b){0,4}c{2,}",
      "[a-]+",
      "[\\d.]+",
      "x{3}",
      "(a*)*b",
      "\\.\\*\\[",
      "[A-Za-z_][A-Za-z0-9_]*",
      "-?(0|[1-9][0-9]*)(\\.[0-9]+)?",
      "(a|ab)(c|bcd)(d*)",
      "[\\s\\S]{1,2}",
      "a??b+?",
      "\\x41\\u0042",
  };
  std::mt19937 rng(7);
  const std::string alphabet = "abcdx0129-. _A*[\n\tB";
  for (const std::string& pat : patterns) {
    SCOPED_TRACE(pat);
    Program p = MustLower(RegexGrammar(pat));
    std::regex re(pat, std::regex::ECMAScript);
    int accepted = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      int len = static_cast<int>(rng() % 8);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      bool expect = std::regex_match(s, re);
      accepted += expect;
      ASSERT_EQ(FullMatch(p, s), expect) << "'" << s << "'";
    }
  }
}

TEST(Regex, UnicodeAndJsonStringContext) {
  Program p = MustLower(RegexGrammar("[α-ω]+é."));
  EXPECT_TRUE(FullMatch(p, "αβωé€"));
  EXPECT_FALSE(FullMatch(p, "aé€"));
  EXPECT_FALSE(FullMatch(p, "αé\n"));  // . excludes newline

  // In a JSON string, a quote, a backslash or a newline in the pattern is written escaped.
  RegexOptions o;
  o.json_string = true;
  auto e = CompileRegex("a\"b\\\\c\\n[^x]", o);
  ASSERT_TRUE(e.ok());
  Grammar g;
  g.Define(g.RuleId("root"), *e);
  g.set_root(0);
  Program jp = MustLower(g);
  EXPECT_TRUE(FullMatch(jp, "a\\\"b\\\\c\\ny"));
  EXPECT_TRUE(FullMatch(jp, "a\\\"b\\\\c\\n\\\""));  // [^x] includes the quote, escaped
  EXPECT_FALSE(FullMatch(jp, "a\"b\\\\c\\ny"));      // a raw quote would end the string
  EXPECT_FALSE(FullMatch(jp, "a\\\"b\\\\c\ny"));     // a raw newline is not JSON

  o.search = true;
  auto s = CompileRegex("^ab", o);
  ASSERT_TRUE(s.ok());
  Grammar g2;
  g2.Define(g2.RuleId("root"), *s);
  g2.set_root(0);
  Program sp = MustLower(g2);
  EXPECT_TRUE(FullMatch(sp, "abzz"));
  EXPECT_FALSE(FullMatch(sp, "zab"));
}

TEST(Regex, UnsupportedConstructsAreErrors) {
  for (auto [pat, needle] :
       std::vector<std::pair<std::string, std::string>>{{"(a)\\1", "backreferences"},
                                                        {"a(?=b)", "lookaround"},
                                                        {"\\bword", "word boundaries"},
                                                        {"a^b", "'^' is only supported at the start"},
                                                        {"a$b", "'$' is only supported at the end"},
                                                        {"(ab", "expected ')'"},
                                                        {"ab)", "unbalanced"},
                                                        {"*a", "nothing to repeat"},
                                                        {"[ab", "unterminated character class"},
                                                        {"a{3,1}", "n <= m"},
                                                        {"a++", "possessive"}}) {
    auto g = RegexGrammar(pat);
    ASSERT_FALSE(g.ok()) << pat;
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  }
}

}  // namespace
}  // namespace ferry::constraint
