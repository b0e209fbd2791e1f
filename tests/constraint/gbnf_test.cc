#include <fstream>
#include <sstream>

#include "constraint/gbnf_parser.h"
#include "constraint_test_util.h"

namespace ferry::constraint {
namespace {

using testing::FullMatch;
using testing::MustLower;

std::string ReadGrammar(const std::string& name) {
  std::ifstream f(std::string(FERRY_SOURCE_DIR) + "/tests/constraint/gbnf/" + name + ".gbnf");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Gbnf, LlamaCppExampleGrammarsParseAndMatch) {
  struct Case {
    const char* grammar;
    std::vector<std::string> accept, reject;
  };
  std::vector<Case> cases = {
      {"json",
       {"{\"a\": [1, 2.5, \"x\\n\"], \"b\": {\"c\": null}}", "{}", "{\"k\":true}"},
       {"[1]", "{\"a\":}", "{\"a\" 1}", "{\"a\": 01}"}},
      {"json_arr", {"[\n]", "[\n{\"a\": 1},\n{}]"}, {"[]", "{}", "[\n1,]"}},
      {"arithmetic", {"1+2*(3-4)=5\n", "(x/2) = y\nz=1\n"}, {"1+=2\n", "()=1\n", "1=2"}},
      {"c", {"int main(){return 0;}", "float f(int x){x = x+1;}"}, {"int main(", "main(){}"}},
      {"list", {"- one\n- two\n"}, {"one\n", "- \n"}},
      {"english", {"Hello, world."}, {"Héllo"}},
      {"chess",
       {"1. e4 e5\n2. Nf3 Nc6\n", "1. O-O exd8=Q+\n12. Kh1 Qxf7#\n"},
       {"1. e4 e5\n", "1. e9 e5\n2. a1 a2\n"}},
      {"japanese", {"こんにちは"}, {"hello"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.grammar);
    std::string text = ReadGrammar(c.grammar);
    ASSERT_FALSE(text.empty());
    Program p = MustLower(ParseGbnf(text));
    for (const auto& s : c.accept) EXPECT_TRUE(FullMatch(p, s)) << s;
    for (const auto& s : c.reject) EXPECT_FALSE(FullMatch(p, s)) << s;
  }
}

TEST(Gbnf, Syntax) {
  Program p = MustLower(ParseGbnf(R"(# comment
root ::= greeting (", " name)? "!"  # trailing comment
greeting ::= "hi" | "hello" |
    "hey"
name ::= [A-Z] [a-z]{1,3} ("-" [A-Z][a-z]+)*
)"));
  EXPECT_TRUE(FullMatch(p, "hi!"));
  EXPECT_TRUE(FullMatch(p, "hey, Bob!"));
  EXPECT_TRUE(FullMatch(p, "hello, Ann-Marie!"));
  EXPECT_FALSE(FullMatch(p, "hello, Bobby!"));  // {1,3}
  EXPECT_FALSE(FullMatch(p, "hi"));

  Program esc = MustLower(ParseGbnf("root ::= \"\\x41\\u00e9\\t\" [^\\n\\]] . [\\U0001F600-\\U0001F64F]\n"));
  EXPECT_TRUE(FullMatch(esc, "A\xc3\xa9\tx\xe2\x82\xac\xf0\x9f\x98\x80"));
  EXPECT_FALSE(FullMatch(esc, "A\xc3\xa9\t]x\xf0\x9f\x98\x80"));
  EXPECT_FALSE(FullMatch(esc, "A\xc3\xa9\txy\xf0\x9f\x99\x90"));  // U+1F650 outside

  Program rep = MustLower(ParseGbnf("root ::= \"a\"{2} \"b\"{2,} \"c\"{,1} \"d\"+\n"));
  EXPECT_TRUE(FullMatch(rep, "aabbd"));
  EXPECT_TRUE(FullMatch(rep, "aabbbbcdd"));
  EXPECT_FALSE(FullMatch(rep, "abbd"));
  EXPECT_FALSE(FullMatch(rep, "aabbccd"));
}

// Stacked repeats fold into one with the same language, so the matcher never explores
// 2^levels splits of the same bytes (a fuzz find: "a"++++...+ ran out of memory).
TEST(Gbnf, StackedRepeatsFoldToOne) {
  Program plus = MustLower(ParseGbnf("root ::= \"a\"++++++++++++++++++++++++++++++++ \"b\"\n"));
  EXPECT_TRUE(FullMatch(plus, "ab"));
  EXPECT_TRUE(FullMatch(plus, std::string(300, 'a') + "b"));
  EXPECT_FALSE(FullMatch(plus, "b"));
  Program opt_star = MustLower(ParseGbnf("root ::= (\"a\"?)+ \"b\"\n"));
  EXPECT_TRUE(FullMatch(opt_star, "b"));
  EXPECT_TRUE(FullMatch(opt_star, "aaab"));
  Program counted = MustLower(ParseGbnf("root ::= (\"a\"+){3,4} (\"c\"?){2}\n"));
  EXPECT_FALSE(FullMatch(counted, "aa"));
  EXPECT_TRUE(FullMatch(counted, "aaa"));
  EXPECT_TRUE(FullMatch(counted, "aaaaaaacc"));
  EXPECT_FALSE(FullMatch(counted, "aaaccc"));
  Program bounded = MustLower(ParseGbnf("root ::= (\"a\"{2}){2}\n"));  // not folded: exactly 4
  EXPECT_TRUE(FullMatch(bounded, "aaaa"));
  EXPECT_FALSE(FullMatch(bounded, "aaa"));
}

// A grammar ambiguous past folding (each level may end or go on after any byte) keeps
// 2^levels parses alive; the machine stops at kMaxStacks with kDead and overflowed().
TEST(Gbnf, AmbiguityPastTheStackLimitOverflows) {
  std::string e = "\"a\"";
  for (int level = 0; level < 20; ++level) e = "(" + e + "+ \"b\"?)+";
  Program p = MustLower(ParseGbnf("root ::= " + e + "\n"));
  StackMachine m(&p);
  int32_t s = m.Start();
  int steps = 0;
  for (; steps < 64 && s != StackMachine::kDead; ++steps) s = m.Advance(s, 'a');
  EXPECT_TRUE(m.overflowed());
  EXPECT_EQ(s, StackMachine::kDead);
  EXPECT_LT(steps, 64);
  // Small inputs of the same grammar still match before the limit is reached.
  EXPECT_TRUE(FullMatch(p, "ab"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto g = ParseGbnf(text);
    Status st = g.ok() ? Lower(*g).status() : g.status();
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  };
  expect_error("start ::= \"a\"\n", "no 'root' rule");
  expect_error("root ::= missing\n", "'missing' is referenced but never defined");
  expect_error("root ::= root \"a\" | \"b\"\n", "left-recursive");
  expect_error("root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"\n", "left-recursive");
  expect_error("root ::= \"abc\n", "unterminated string");
  expect_error("root ::= [ab", "unterminated character class");
  expect_error("root ::= \"a\" <think\n", "unterminated token");
  expect_error("root ::= \"\\q\"\n", "unknown escape");
  expect_error("root ::= (\"a\"\n", "expected ')'");
  expect_error("root ::= \"a\"{3,1}\n", "m <= n");
  expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
  expect_error("root ::= [z-a]\n", "reversed");
}

}  // namespace
}  // namespace ferry::constraint
