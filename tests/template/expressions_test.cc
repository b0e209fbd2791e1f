// Expressions with Python semantics: arithmetic, comparisons, str()/repr(), slicing, methods.
#include "render_util.h"

namespace ferry::testing {
namespace {

TEST(TemplateExpressions, Arithmetic) {
  EXPECT_EQ(Render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 / 2 }} {{ 4 / 2 }}"),
            "7 3 -4 2 1024 0.5 2.0");
  EXPECT_EQ(Render("{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 3 - 1.0 }}"),
            "2.5 0.30000000000000004 1e+20 1e-05 2.0");
  EXPECT_EQ(Render("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none }}"), "ababab [1, 2] a1None");
  EXPECT_EQ(Render("{{ 1 / 0 }}"), "ERROR: ZeroDivisionError: division by zero");
  EXPECT_EQ(Render("{{ 'a' + 1 }}"), "ERROR: TypeError: can only concatenate str (not \"int\") to str");
}

TEST(TemplateExpressions, ComparisonsAndLogic) {
  EXPECT_EQ(Render("{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }}"),
            "True True True True True");
  EXPECT_EQ(Render("{{ none or 'd' }} {{ 0 and 'x' }} {{ 'y' if false }}|{{ 'a' if 0 else 'b' }}"), "d 0 |b");
  EXPECT_EQ(Render("{{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}"),
            "True False True");
  EXPECT_EQ(Render("{{ 1 < 'a' }}"), "ERROR: TypeError: '<' not supported between instances of 'int' and 'str'");
}

TEST(TemplateExpressions, PythonStrAndRepr) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 1.0, {'k': \"it's\"}] }}"), "[1, 'a', None, True, 1.0, {'k': \"it's\"}]");
  EXPECT_EQ(Render("{{ (1,) }} {{ x }}|{{ none }}"), "(1,) |None");
}

TEST(TemplateExpressions, SubscriptsAndSlices) {
  const char* ctx = R"({"m": [{"role": "a"}, {"role": "b"}, {"role": "c"}], "s": "h\u00e9llo"})";
  EXPECT_EQ(Render("{{ m[0].role }}{{ m[-1]['role'] }}{{ m[1:] | map(attribute='role') | join }}", ctx), "acbc");
  EXPECT_EQ(Render("{{ m[::-1][0].role }} {{ s[1] }} {{ s[::-1] }} {{ s[:2] }} {{ s | length }}", ctx), "c \xc3\xa9 oll\xc3\xa9h h\xc3\xa9 5");
  EXPECT_EQ(Render("{{ m[7] }}|{{ m[0].missing }}|", ctx), "||");
  EXPECT_EQ(Render("{{ nope.attr }}"), "ERROR: UndefinedError: 'nope' is undefined");
}

TEST(TemplateExpressions, StringMethods) {
  EXPECT_EQ(Render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}"),
            "a b|a|['a', 'b', '', 'c']|['a', 'b']");
  EXPECT_EQ(Render("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'ab'.upper() }} {{ 'hi there'.title() }}"),
            "True True AB Hi There");
  EXPECT_EQ(Render("{{ 'a-b-c'.replace('-', '+', 1) }} {{ '{} is {name}'.format(1, name='x') }} {{ '%s=%d' % ('a', 3) }}"),
            "a+b-c 1 is x a=3");
  EXPECT_EQ(Render("{{ 'x'.nosuch() }}"), "ERROR: UndefinedError: 'str object' has no attribute 'nosuch'");
}

TEST(TemplateExpressions, DictAndListMethods) {
  const char* ctx = R"({"d": {"b": 1, "a": 2}})";
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys() | list }}{{ d.get('z', 9) }}{{ d.get('z') }}", ctx),
            "b=1;a=2;['b', 'a']9None");
  // The immutable sandbox transformers uses refuses mutating methods.
  EXPECT_EQ(Render("{% set l = [1] %}{{ l.append(2) }}"), "ERROR: SecurityError: access to attribute 'append' of 'list' object is unsafe.");
}

}  // namespace
}  // namespace ferry::testing
