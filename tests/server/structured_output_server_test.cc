// Structured outputs through `ferry serve` on the trained stories260K model: every request
// field form (OpenAI response_format, vLLM structured_outputs/guided_*, llama.cpp
// grammar/json_schema) constrains the output, streamed and whole alike; bad constraints are 400s
// that say why.
#include <gtest/gtest.h>

#include <regex>

#include "../constraint/json_validator.h"
#include "server_fixture.h"
#include "server_process.h"
#include "test_util.h"

namespace ferry {
namespace {

const char* kSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
  "age":{"type":"integer","minimum":0,"maximum":120},"ok":{"type":"boolean"}},"required":["name","age","ok"],
  "additionalProperties":false})";

class StructuredOutputServer : public TrainedServerTest<StructuredOutputServer> {
 protected:
  static json Chat(json extra, int* status = nullptr) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}},
                 {"max_tokens", 300},
                 {"seed", 3}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    HttpResult r = Post(*server_, "/v1/chat/completions", body.dump());
    if (status) *status = r.status;
    return r.Json();
  }
  static void ExpectBadRequest(json extra, const std::string& needle) {
    int status = 0;
    json j = Chat(std::move(extra), &status);
    EXPECT_EQ(status, 400) << j.dump();
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << j.dump();
  }
};

TEST_F(StructuredOutputServer, JsonSchemaInEveryFieldFormValidates) {
  json schema = json::parse(kSchema);
  std::vector<json> forms = {
      {{"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "person"}, {"schema", schema}, {"strict", true}}}}}},
      {{"structured_outputs", {{"json", schema}}}},
      {{"guided_json", schema.dump()}},
      {{"json_schema", schema}},
  };
  int complete = 0;
  for (const json& form : forms) {
    SCOPED_TRACE(form.dump());
    json extra = form;
    extra["n"] = 2;
    extra["temperature"] = 1.0;
    int status = 0;
    json j = Chat(extra, &status);
    ASSERT_EQ(status, 200) << j.dump();
    for (const json& c : j["choices"]) {
      if (c["finish_reason"] != "stop") continue;
      std::string text = c["message"]["content"];
      auto v = json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << text;
      nlohmann::ordered_json ov = nlohmann::ordered_json::parse(text),
                             os = nlohmann::ordered_json::parse(kSchema);
      EXPECT_TRUE(constraint::testing::Validate(os, ov, os)) << text;
      ++complete;
    }
  }
  EXPECT_GT(complete, 2);
}

TEST_F(StructuredOutputServer, RegexChoiceGrammarAndJsonObject) {
  json r = Chat({{"guided_regex", "(yes|no), [a-z]{2,5}\\."}, {"temperature", 1.0}});
  std::string text = r["choices"][0]["message"]["content"];
  EXPECT_TRUE(std::regex_match(text, std::regex("(yes|no), [a-z]{2,5}\\."))) << text;
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");

  r = Chat({{"structured_outputs", {{"choice", {"happy", "sad", "sleepy"}}}}});
  text = r["choices"][0]["message"]["content"];
  EXPECT_TRUE(text == "happy" || text == "sad" || text == "sleepy") << text;

  r = Chat({{"grammar", "root ::= \"A\" [0-9]{3} (\"!\" | \"?\")\n"}});
  text = r["choices"][0]["message"]["content"];
  EXPECT_TRUE(std::regex_match(text, std::regex("A[0-9]{3}[!?]"))) << text;

  r = Chat({{"response_format", {{"type", "json_object"}}}, {"max_tokens", 400}});
  if (r["choices"][0]["finish_reason"] == "stop") {
    auto v = json::parse(r["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(v.is_object()) << r.dump();
  }
}

TEST_F(StructuredOutputServer, StreamedEqualsWhole) {
  json extra = {{"guided_json", json::parse(kSchema)}, {"temperature", 0.8}, {"seed", 11}};
  json whole = Chat(extra);
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}},
               {"max_tokens", 300},
               {"stream", true}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  std::string streamed;
  testing::PostStream(*server_, "/v1/chat/completions", body.dump(), [&](const std::string& data) {
    if (data == "[DONE]") return true;
    json e = json::parse(data);
    for (const json& c : e["choices"])
      if (c["delta"].contains("content")) streamed += c["delta"]["content"].get<std::string>();
    return true;
  });
  EXPECT_EQ(streamed, whole["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(StructuredOutputServer, BadConstraintsAre400sWithTheReason) {
  ExpectBadRequest(
      {{"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}, {"minProperties", 1}}}}}}}},
      "unsupported JSON Schema keyword 'minProperties'");
  ExpectBadRequest({{"guided_regex", "(a"}}, "expected ')'");
  ExpectBadRequest({{"grammar", "start ::= \"a\"\n"}}, "no 'root' rule");
  ExpectBadRequest({{"guided_json", "{not json"}}, "not valid JSON");
  ExpectBadRequest({{"guided_regex", "a"}, {"guided_choice", {"b"}}}, "give one");
  ExpectBadRequest({{"response_format", {{"type", "xml"}}}}, "expected text, json_object or json_schema");
  ExpectBadRequest(
      {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", json::object()}}}}}},
      "name' is required");
  ExpectBadRequest({{"structured_outputs", {{"lark", "x"}}}}, "'structured_outputs.lark' is not supported");
  ExpectBadRequest({{"guided_decoding_backend", "xgrammar"}}, "not supported");
}

}  // namespace
}  // namespace ferry
