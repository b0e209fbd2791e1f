// Statements: for loops (loop.*, else, filters, break/continue), scoping, set, namespace,
// macros, call/filter blocks, raise_exception, strftime_now, unsupported constructs, limits.
#include "render_util.h"

namespace ferry::testing {
namespace {

TEST(TemplateStatements, LoopVariables) {
  EXPECT_EQ(Render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}"),
            "103TrueFalse3bo;212FalseFalse3ace;321FalseTrue3bo;");
}

TEST(TemplateStatements, LoopControlsElseAndFilter) {
  EXPECT_EQ(Render("{% for i in range(10) %}{% if i == 4 %}{% break %}{% endif %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(Render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for i in range(6) if i is even %}{{ i }}/{{ loop.length }} {% endfor %}"), "0/3 2/3 4/3 ");
  EXPECT_EQ(Render("{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(Render("{% break %}"), "PARSE ERROR: TemplateSyntaxError: 'break' outside of a for loop (line 1)");
}

TEST(TemplateStatements, ScopingFollowsJinja) {
  // A set inside a loop does not leak out; inside an if it does; namespaces carry state out.
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(Render("{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  // Each iteration starts afresh from the enclosing scope.
  EXPECT_EQ(Render("{% for x in [1, 2] %}{% if loop.first %}{% set y = 5 %}{% endif %}{{ y }}{% endfor %}"), "5");
  EXPECT_EQ(Render("{% set y = 1 %}{% for x in [1, 2] %}{{ y }}{% set y = 5 %}{{ y }}{% endfor %}{{ y }}"), "15151");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "3");
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(Render("{% set t %}  in {{ 1 + 1 }}  {% endset %}[{{ t }}]{% set u | trim %}  y  {% endset %}[{{ u }}]"), "[  in 2  ][y]");
}

TEST(TemplateStatements, Macros) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }}"),
            "Hi A! Hi B?");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(Render("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(Render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(Render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(TemplateStatements, RaiseExceptionCarriesTheMessage) {
  Status st = RenderStatus("{{ raise_exception('Roles must alternate') }}");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "TemplateError: Roles must alternate");
}

TEST(TemplateStatements, StrftimeNowUsesTheGivenTime) {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 29;
  ChatRenderOptions o;
  o.now = tm;
  auto t = ChatTemplate::Parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render(nlohmann::ordered_json::object(), o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "29 Nov 2026");
}

TEST(TemplateStatements, UnsupportedConstructsAreNamedErrors) {
  Status st = RenderStatus("{% include 'x.jinja' %}");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), "Unsupported: unsupported template statement '{% include %}' (line 1)");
  EXPECT_EQ(RenderStatus("{% for x in y recursive %}{% endfor %}").code(), StatusCode::kUnsupported);
  EXPECT_EQ(RenderStatus("{{ f(*args) }}").code(), StatusCode::kUnsupported);
  EXPECT_EQ(Render("{% frob %}"), "PARSE ERROR: TemplateSyntaxError: Encountered unknown tag 'frob' (line 1)");
}

TEST(TemplateStatements, LimitsStopRunawayTemplates) {
  ChatRenderOptions o;
  o.limits.max_steps = 10000;
  EXPECT_EQ(RenderStatus("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", o).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{{ range(1000000) }}").message(),
            "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  o.limits.max_output_bytes = 1000;
  EXPECT_EQ(RenderStatus("{{ 'x' * 5000 }}", "{}", o).code(), StatusCode::kResourceExhausted);
  std::string deep(500, '(');
  EXPECT_EQ(RenderStatus("{{ " + deep + " }}").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry::testing
