// Filters and tests as jinja2 (and transformers' tojson) define them.
#include "render_util.h"

namespace ferry::testing {
namespace {

TEST(TemplateFilters, ToJsonIsJsonDumpsWithoutAsciiEscaping) {
  const char* ctx = R"({"v": {"name": "caf\u00e9 \ud83e\udd99", "n": [1, 2.5, true, null], "e": {}}})";
  EXPECT_EQ(Render("{{ v | tojson }}", ctx), "{\"name\": \"caf\xc3\xa9 \xf0\x9f\xa6\x99\", \"n\": [1, 2.5, true, null], \"e\": {}}");
  EXPECT_EQ(Render("{{ v.n | tojson(indent=2) }}", ctx), "[\n  1,\n  2.5,\n  true,\n  null\n]");
  EXPECT_EQ(Render("{{ {'b': 1, 'a': '\"\\n'} | tojson(sort_keys=true, separators=(',', ':')) }}"), "{\"a\":\"\\\"\\n\",\"b\":1}");
  EXPECT_EQ(Render("{{ 'é' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
  EXPECT_EQ(Render("{{ nope | tojson }}"), "ERROR: TypeError: Object of type Undefined is not JSON serializable");
}

TEST(TemplateFilters, CommonFilters) {
  EXPECT_EQ(Render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ [3, 1, 2] | sort | join(',') }} {{ 'aBc' | upper }}"),
            "d e 1,2,3 ABC");
  EXPECT_EQ(Render("{{ '  t  ' | trim }}|{{ [1, 2] | first }}{{ [1, 2] | last }}|{{ 'abc' | list }}|{{ '3' | int + 1 }}|{{ '2.5' | float }}"),
            "t|12|['a', 'b', 'c']|4|2.5");
  EXPECT_EQ(Render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'x' | indent(2, true) }}"), "a\n  b\n\n  c|  x");
  EXPECT_EQ(Render("{{ ['a', 'B', 'b', 'A'] | unique | list }} {{ {'b': 1, 'a': 2} | dictsort }} {{ [1, -2] | map('abs') | sum }}"),
            "['a', 'B'] [('a', 2), ('b', 1)] 3");
  EXPECT_EQ(Render("{{ 'hello world' | capitalize }} {{ 'a-b c' | title }} {{ 2.5 | round }} {{ [1, 5, 3] | max }} {{ 'x<y' | e }}"),
            "Hello world A-B C 2.0 5 x&lt;y");
}

TEST(TemplateFilters, SelectAndMap) {
  const char* ctx = R"({"m": [{"role": "user", "n": 1}, {"role": "tool"}, {"role": "user", "n": 3}]})";
  EXPECT_EQ(Render("{{ m | selectattr('role', 'equalto', 'user') | map(attribute='n') | list }}", ctx), "[1, 3]");
  EXPECT_EQ(Render("{{ m | rejectattr('n', 'defined') | list | length }} {{ [0, 1, 2] | select | list }} {{ [1, 2, 3] | reject('odd') | list }}", ctx),
            "1 [1, 2] [2]");
  EXPECT_EQ(Render("{{ none | selectattr('a') | list }}"), "[]");  // jinja2 guards with `if value`
}

TEST(TemplateFilters, UnknownFilterIsAnErrorNamingIt) {
  EXPECT_EQ(Render("{{ 1 | frobnicate }}"), "PARSE ERROR: TemplateAssertionError: No filter named 'frobnicate'. (line 1)");
  // Inside an `if`, jinja2 defers the error to when the filter runs.
  EXPECT_EQ(Render("{% if false %}{{ 1 | frobnicate }}{% endif %}ok"), "ok");
  EXPECT_EQ(Render("{% if true %}{{ 1 | frobnicate }}{% endif %}"), "ERROR: TemplateRuntimeError: No filter named 'frobnicate' found.");
  Status st = RenderStatus("{{ 'a' | wordwrap(3) }}");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), "Unsupported: filter 'wordwrap' is not implemented by this renderer");
}

TEST(TemplateTests, IsTests) {
  const char* ctx = R"({"d": {"a": 1}, "l": [1], "s": "x", "n": null, "f": 1.5, "b": true})";
  EXPECT_EQ(Render("{{ d is mapping }}{{ l is iterable }}{{ s is string }}{{ n is none }}{{ f is float }}{{ b is boolean }}"
                   "{{ b is integer }}{{ 1 is number }}{{ x is undefined }}{{ s is not defined }}",
                   ctx),
            "TrueTrueTrueTrueTrueTrueFalseTrueTrueFalse");
  EXPECT_EQ(Render("{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ 'a' is in ['a'] }}{{ 2 is gt 1 }}{{ s is eq('x') }}{{ l is sequence }}", ctx),
            "TrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ 1 is frob }}"), "PARSE ERROR: TemplateAssertionError: No test named 'frob'. (line 1)");
}

}  // namespace
}  // namespace ferry::testing
