#include "constraint/json_schema.h"

#include "constraint_test_util.h"
#include "json_validator.h"

namespace ferry::constraint {
namespace {

using testing::FullMatch;
using testing::Json;
using testing::MustLower;

// Schemas covering every supported keyword. Properties are generated in schema order (the
// grammar's order), so "accepted iff valid" is exact.
const std::vector<std::string> kSchemas = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
        "email":{"type":"string","format":"email"}},"required":["name","age"],"additionalProperties":false})",
    R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":["string","null"],"maxLength":3}},
        "additionalProperties":{"type":"integer"}})",
    R"({"type":"array","items":{"type":"number","exclusiveMinimum":-2,"maximum":3},"minItems":1,"maxItems":4})",
    R"({"type":"array","prefixItems":[{"type":"string","minLength":2},{"type":"integer"}],"items":false})",
    R"({"type":"array","prefixItems":[{"const":"x"}],"items":{"enum":[1,"two",null,[3]]},"maxItems":3})",
    R"({"enum":["red","green",{"rgb":[1,2,3]}]})",
    R"({"anyOf":[{"type":"integer","exclusiveMaximum":10},{"type":"string","pattern":"^ab[0-9]*$"}]})",
    R"({"oneOf":[{"type":"null"},{"type":"boolean"}]})",
    R"({"allOf":[{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
        {"$ref":"#/$defs/y"}],"$defs":{"y":{"type":"object","properties":{"y":{"type":"string"}}}}})",
    R"({"allOf":[{"type":"object","properties":{"x":{"type":"integer"},"z":{"type":"null"}}},{"properties":{"x":{"type":"integer"},"y":{"type":"boolean"}},
        "additionalProperties":false}]})",
    R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":-5,"exclusiveMaximum":5},
        "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}}})",
    R"({"type":"object","properties":{"d":{"type":"string","format":"date"},"t":{"type":"string","format":"time"},
        "dt":{"type":"string","format":"date-time"},"u":{"type":"string","format":"uuid"}},"additionalProperties":false})",
    R"({"type":"number","minimum":-3,"exclusiveMaximum":2})",
    R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":4})",
    R"({"type":"number","exclusiveMaximum":-1,"minimum":-6})",
    R"({"type":"integer","exclusiveMinimum":-3.5,"maximum":7.9})",
    R"({"type":"string","pattern":"ab|c{2}"})",
    R"({})",
    R"({"type":"object","properties":{"p":{"type":"array"},"q":{"type":"object"}},"required":["q"]})",
};

TEST(JsonSchema, AcceptsExactlyTheValidInstances) {
  for (size_t si = 0; si < kSchemas.size(); ++si) {
    SCOPED_TRACE(kSchemas[si]);
    Json schema = Json::parse(kSchemas[si]);
    Program p = MustLower(JsonSchemaGrammar(schema));
    testing::InstanceGenerator gen(schema, static_cast<uint32_t>(si) + 1);
    int valid = 0, invalid = 0;
    for (int i = 0; i < 400; ++i) {
      Json v = gen.Generate(schema);
      bool expect = testing::Validate(schema, v, schema);
      (expect ? valid : invalid)++;
      ASSERT_EQ(FullMatch(p, v.dump()), expect) << v.dump();
      if (v.dump().size() < 200) {
        ASSERT_EQ(FullMatch(p, v.dump(1)), expect) << v.dump(1);
      }
    }
    // The generator must exercise both sides, or the test proves little.
    EXPECT_GT(valid, 10);
    if (kSchemas[si] != "{}") {
      EXPECT_GT(invalid, 10);
    }
  }
}

TEST(JsonSchema, WhitespaceIsBounded) {
  JsonGrammarOptions o;
  o.max_whitespace = 3;
  Program p = MustLower(
      JsonSchemaGrammar(std::string_view(R"({"type":"object","properties":{"a":{"type":"integer"}}})"), o));
  EXPECT_TRUE(FullMatch(p, "{   \"a\":1}"));
  EXPECT_FALSE(FullMatch(p, "{    \"a\":1}"));
  EXPECT_TRUE(FullMatch(p, "{\"a\" :\n\t 1 }"));
  Program any = MustLower(AnyJsonGrammar(true, o));
  EXPECT_TRUE(FullMatch(any, "{\"x\": [1, {\"y\": null}], \"z\": \"\\u00e9\"}"));
  EXPECT_FALSE(FullMatch(any, "[1]"));
  EXPECT_FALSE(FullMatch(any, "{\"x\": [1,    2]}"));
}

TEST(JsonSchema, UnsupportedKeywordsAreErrorsNamingThem) {
  auto expect_error = [](const std::string& schema, const std::string& needle) {
    auto g = JsonSchemaGrammar(std::string_view(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  };
  expect_error(R"({"type":"object","minProperties":1})", "unsupported JSON Schema keyword 'minProperties'");
  expect_error(R"({"type":"object","properties":{"a":{"type":"string","contentEncoding":"base64"}}})",
               "'#/properties/a': unsupported JSON Schema keyword 'contentEncoding'");
  expect_error(R"({"type":"string","format":"hostname"})", "unsupported string format 'hostname'");
  expect_error(R"({"type":"number","minimum":0.5})", "bounds of a number must be integers");
  expect_error(R"({"$ref":"#/$defs/missing"})", "does not resolve");
  expect_error(R"({"$ref":"http://x/y"})", "not local");
  expect_error(R"({"type":"strin"})", "unknown type 'strin'");
  expect_error(R"j({"type":"string","pattern":"(?=a)"})j", "lookaround");
  expect_error(R"({"allOf":[{"type":"string"}]})", "allOf is supported for object schemas only");
  expect_error(R"({not json)", "not valid JSON");
}

}  // namespace
}  // namespace ferry::constraint
