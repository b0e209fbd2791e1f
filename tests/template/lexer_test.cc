// Whitespace control: trim_blocks, lstrip_blocks, `-` and `+` markers, comments, raw, newlines.
#include "render_util.h"

namespace ferry::testing {
namespace {

TEST(TemplateWhitespace, TrimBlocksEatsOneNewlineAfterBlockTags) {
  EXPECT_EQ(Render("{% if true %}\nA\n{% endif %}\nB"), "A\nB");
  EXPECT_EQ(Render("{# c #}\nA"), "A");
  EXPECT_EQ(Render("{{ 'x' }}\nA"), "x\nA");  // not after print tags
}

TEST(TemplateWhitespace, LstripBlocksStripsIndentBeforeBlockTags) {
  EXPECT_EQ(Render("  {% if true %}\n    A\n  {% endif %}\n"), "    A\n");
  EXPECT_EQ(Render("x  {% if true %}y{% endif %}"), "x  y");  // not only whitespace before the tag
  EXPECT_EQ(Render("  {{ 'v' }}"), "  v");                     // not before print tags
  EXPECT_EQ(Render("  {%+ if true %}y{% endif %}"), "  y");     // `+` keeps it
}

TEST(TemplateWhitespace, MinusMarkersStripAllWhitespace) {
  EXPECT_EQ(Render("a  \n {{- 'b' -}} \n\n c"), "abc");
  EXPECT_EQ(Render("a\n\n{%- if true -%}\n\n b {%- endif %}"), "ab");
  EXPECT_EQ(Render("a {#- comment -#}  b"), "ab");
}

TEST(TemplateWhitespace, PlusDisablesTrimBlocks) {
  EXPECT_EQ(Render("{% if true +%}\nA{% endif %}"), "\nA");
}

TEST(TemplateWhitespace, TrailingNewlineDroppedAndCrlfNormalized) {
  EXPECT_EQ(Render("A\n"), "A");
  EXPECT_EQ(Render("A\n\n"), "A\n");
  EXPECT_EQ(Render("A\r\nB"), "A\nB");
}

TEST(TemplateWhitespace, RawBlocksAreVerbatim) {
  EXPECT_EQ(Render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

TEST(TemplateLexer, BracesInsideExpressionsDoNotEndTags) {
  EXPECT_EQ(Render("{{ {'a': {'b': 1}}['a']['b'] }}"), "1");
  EXPECT_EQ(Render("{{ '%}' ~ '}}' }}"), "%}}}");
}

TEST(TemplateLexer, StringEscapes) {
  EXPECT_EQ(Render(R"({{ "a\nb\t\"q\"\u00e9\\" }})"), "a\nb\t\"q\"\xc3\xa9\\");
  EXPECT_EQ(Render(R"({{ 'it\'s' }})"), "it's");
}

TEST(TemplateLexer, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(Render("a\n{{ 'x' "), "PARSE ERROR: TemplateSyntaxError: unexpected end of template, expected '}}' (line 2)");
  EXPECT_EQ(Render("{# open"), "PARSE ERROR: TemplateSyntaxError: Missing end of comment tag (line 1)");
  EXPECT_EQ(Render("{% if x %}"), "PARSE ERROR: TemplateSyntaxError: unexpected end of template; expected one of: 'elif', 'else', 'endif' (line 1)");
}

}  // namespace
}  // namespace ferry::testing
