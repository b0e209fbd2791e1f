// Tool-call parsers on what the real chat templates render for assistant tool calls, on
// partial outputs, and received whole, streamed in one piece and streamed byte by byte.
#include "tool_calls/tool_call_parser.h"

#include <gtest/gtest.h>

#include "tool_calls/partial_json.h"
#include "tool_calls_test_util.h"

namespace ferry::tool_calls {
namespace {

using testing::json;

json TwoCalls() {
  return json::parse(R"([{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
                         {"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}])");
}

struct Family {
  const char* tmpl;
  ToolFormat format;
  bool parallel;                  // the template renders several calls in one turn
  bool string_arguments = false;  // the template wants arguments as strings
};

class RenderedFamilies : public ::testing::TestWithParam<Family> {};

TEST_P(RenderedFamilies, ParsesTheTemplatesOwnRenderingThreeWays) {
  const Family& f = GetParam();
  FERRY_REQUIRE_ASSET(std::string("chat-templates/") + f.tmpl + ".jinja");
  EXPECT_EQ(DetectToolFormat(testing::ReadTemplate(f.tmpl)), f.format) << f.tmpl;
  json calls = TwoCalls();
  if (!f.parallel) calls.erase(1);
  const std::string text = testing::RenderedAssistantCalls(f.tmpl, calls, f.string_arguments);
  ASSERT_FALSE(text.empty());
  testing::ThreeWays r = testing::Receive(f.format, text);
  ASSERT_EQ(r.whole.calls.size(), calls.size()) << text;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(r.whole.calls[i].name, calls[i]["name"]) << text;
    EXPECT_EQ(json::parse(r.whole.calls[i].arguments), calls[i]["arguments"]) << text;
    EXPECT_TRUE(r.whole.calls[i].complete) << text;
  }
  EXPECT_EQ(r.whole.content, "") << text;
  testing::ExpectSame(r.whole, r.one_piece, "one piece: " + text);
  testing::ExpectSame(r.whole, r.bytewise, "byte by byte: " + text);
}

INSTANTIATE_TEST_SUITE_P(
    Templates, RenderedFamilies,
    ::testing::Values(Family{"Qwen-Qwen2.5-7B-Instruct", ToolFormat::kHermes, true},
                      Family{"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", ToolFormat::kHermes, true},
                      Family{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolFormat::kHermes, true},
                      Family{"Qwen-QwQ-32B", ToolFormat::kHermes, true},
                      Family{"meta-llama-Llama-3.1-8B-Instruct", ToolFormat::kLlama3, false},
                      Family{"meta-llama-Llama-3.2-3B-Instruct", ToolFormat::kLlama3, false},
                      Family{"mistralai-Mistral-Nemo-Instruct-2407", ToolFormat::kMistralV3, true},
                      Family{"Mistral-Small-3.2-24B-Instruct-2506", ToolFormat::kMistralV11, true},
                      Family{"mistralai-Ministral-3-14B-Reasoning-2512", ToolFormat::kMistralV11, true},
                      Family{"ibm-granite-granite-4.0", ToolFormat::kHermes, true},
                      Family{"Qwen3-Coder", ToolFormat::kQwen3Coder, true},
                      Family{"Qwen3.5-4B", ToolFormat::kQwen3Coder, true},
                      Family{"openai-gpt-oss-120b", ToolFormat::kHarmony, false},
                      Family{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ToolFormat::kDeepSeekR1, true, true},
                      Family{"deepseek-ai-DeepSeek-V3.1", ToolFormat::kDeepSeekV31, true},
                      Family{"deepseek-ai-DeepSeek-V3.2", ToolFormat::kDeepSeekV32, true},
                      Family{"meetkai-functionary-medium-v3.1", ToolFormat::kFunctionaryV31, true},
                      Family{"meetkai-functionary-medium-v3.2", ToolFormat::kFunctionaryV32, true, true},
                      Family{"CohereForAI-c4ai-command-r7b-12-2024-tool_use", ToolFormat::kCommandR7B, true}),
    [](const auto& info) { return testing::TemplateTestName(info.param.tmpl); });

TEST(DetectToolFormat, GraniteThreeWritesItsOwnTag) {
  FERRY_REQUIRE_ASSET("chat-templates/ibm-granite-granite-3.3-2B-Instruct.jinja");
  // Granite 3.3's template describes <|tool_call|> but does not render calls in the history:
  // its format is tested from the wire form (Samples).
  EXPECT_EQ(DetectToolFormat(testing::ReadTemplate("ibm-granite-granite-3.3-2B-Instruct")),
            ToolFormat::kGranite);
}

TEST(DetectToolFormat, OthersFallBackToGeneric) {
  FERRY_REQUIRE_ASSET("chat-templates/google-gemma-2-2b-it.jinja");
  for (const char* t : {"google-gemma-2-2b-it", "inline-phi-4"})
    EXPECT_EQ(DetectToolFormat(testing::ReadTemplate(t)), ToolFormat::kGeneric) << t;
}

// Outputs a model writes, with text around the calls, each received three ways.
struct Sample {
  ToolFormat format;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::string reasoning = "";
};

class Samples : public ::testing::TestWithParam<Sample> {};

TEST_P(Samples, ThreeWaysAgree) {
  const Sample& s = GetParam();
  testing::ThreeWays r = testing::Receive(s.format, s.text);
  EXPECT_EQ(r.whole.content, s.content) << s.text;
  EXPECT_EQ(r.whole.reasoning, s.reasoning) << s.text;
  ASSERT_EQ(r.whole.calls.size(), s.calls.size()) << s.text;
  for (size_t i = 0; i < s.calls.size(); ++i) {
    EXPECT_EQ(r.whole.calls[i].name, s.calls[i].first);
    EXPECT_EQ(r.whole.calls[i].arguments, s.calls[i].second);
  }
  testing::ExpectSame(r.whole, r.one_piece, "one piece: " + s.text);
  testing::ExpectSame(r.whole, r.bytewise, "byte by byte: " + s.text);
}

INSTANTIATE_TEST_SUITE_P(
    Outputs, Samples,
    ::testing::Values(
        Sample{ToolFormat::kHermes,
               "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": "
               "\"}\"}]}}\n</tool_call>",
               "Let me check.",
               {{"f", "{\"a\": [1, {\"b\": \"}\"}]}"}}},
        Sample{ToolFormat::kHermes,
               "No tools needed: 1 < 2 and <tool> is not a call.",
               "No tools needed: 1 < 2 and <tool> is not a call.",
               {}},
        Sample{ToolFormat::kHermes,
               "<tool_call>not json</tool_call> ok",
               "<tool_call>not json</tool_call> ok",
               {}},
        Sample{ToolFormat::kHermes,
               "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"late\"}</tool_call>",
               "",
               {{"late", "{\"x\": 1}"}}},
        Sample{ToolFormat::kHermes,
               "<tool_call>{\"name\": \"s\", \"arguments\": \"{\\\"q\\\": 1}\"}</tool_call>",
               "",
               {{"s", "{\"q\": 1}"}}},
        Sample{ToolFormat::kHermes, "Text  \n", "Text  \n", {}},
        // The fuzzer's find: a key after the name must not turn a call (already streamed) back into text.
        Sample{ToolFormat::kHermes,
               "<tool_call>\n{\"name\": \"f\", \"arhuments\": {\"a\": 1}}\n</tool_call>",
               "",
               {{"f", "{}"}}},
        Sample{ToolFormat::kGeneric,
               "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}], \"x\": 1}",
               "",
               {{"f", "{}"}}},
        Sample{ToolFormat::kLlama3,
               "{\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}",
               "",
               {{"f", "{\"q\": \"x\"}"}}},
        Sample{ToolFormat::kLlama3,
               "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", "
               "\"parameters\": {\"n\": -1.5e3}}",
               "",
               {{"f", "{}"}, {"g", "{\"n\": -1.5e3}"}}},
        Sample{ToolFormat::kLlama3,
               "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": true}}",
               "",
               {{"f", "{\"q\": true}"}}},
        Sample{ToolFormat::kLlama3,
               "{\"answer\": 42} is JSON, not a call",
               "{\"answer\": 42} is JSON, not a call",
               {}},
        Sample{ToolFormat::kLlama3,
               "Sure: <|python_tag|>brave_search.call(query=\"x\")",
               "Sure: <|python_tag|>brave_search.call(query=\"x\")",
               {}},
        Sample{ToolFormat::kMistralV3,
               "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abcdefghi\"}, "
               "{\"name\": \"g\", \"arguments\": {}}]",
               "",
               {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
        Sample{ToolFormat::kMistralV3, "The [TOOL_CALLS] marker alone", "The [TOOL_CALLS] marker alone", {}},
        Sample{ToolFormat::kMistralV3,
               "[TOOL_CALLS] [{\"name\": {\"x\": null}}]",
               "[TOOL_CALLS] [{\"name\": {\"x\": null}}]",
               {}},
        Sample{ToolFormat::kMistralV11,
               "[TOOL_CALLS]f[ARGS]{\"a\": \"[ARGS]\"}[TOOL_CALLS]g[CALL_ID]123456789[ARGS]{}",
               "",
               {{"f", "{\"a\": \"[ARGS]\"}"}, {"g", "{}"}}},
        Sample{ToolFormat::kMistralV11, "Hi [TOOL_CALLS] no", "Hi [TOOL_CALLS] no", {}},
        // Fuzzer finds: an undecodable key is invalid where it closes, not where it began.
        Sample{ToolFormat::kMistralV11,
               "[TOOL_CALLS]f[ARGS]{\"\xa3\xa3"
               "a\": 1}",
               "\": 1}",
               {{"f",
                 "{\"\xa3\xa3"
                 "a"}}},
        Sample{ToolFormat::kGeneric,
               "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"k\": null}}]}",
               "",
               {{"f", "{\"k\": null}"}}},
        Sample{ToolFormat::kGeneric, "{\"response\": \"hi\"}", "{\"response\": \"hi\"}", {}},
        Sample{ToolFormat::kGeneric, "Plain answer.", "Plain answer.", {}},
        // Qwen3-Coder: values are JSON where they spell it, else strings.
        Sample{ToolFormat::kQwen3Coder,
               "I'll check.\n<tool_call>\n<function=f>\n<parameter=q>\nhello <b> world\n</parameter>\n"
               "<parameter=n>\n-2\n</parameter>\n<parameter=o>\n{\"a\": "
               "[1]}\n</parameter>\n</function>\n</tool_call>",
               "I'll check.",
               {{"f", "{\"q\": \"hello <b> world\", \"n\": -2, \"o\": {\"a\":[1]}}"}}},
        Sample{ToolFormat::kQwen3Coder,
               "<function=g>\n</function> and <function=a b> is text",
               "and <function=a b> is text",
               {{"g", "{}"}}},
        Sample{ToolFormat::kQwen3Coder, "<tool_call> alone", "<tool_call> alone", {}},
        // DeepSeek V3.2's DSML: string="true" values are strings whatever they spell, the others JSON.
        Sample{
            ToolFormat::kDeepSeekV32,
            "I'll check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter "
            "name=\"q\" string=\"true\">3 < 4 \"x\"</｜DSML｜parameter>\n<｜DSML｜parameter name=\"s\" "
            "string=\"true\">12</｜DSML｜parameter>\n<｜DSML｜parameter name=\"o\" string=\"false\">{\"a\": "
            "[1]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>\n</"
            "｜DSML｜function_calls> Done.",
            "I'll check.\n\nDone.",
            {{"f", "{\"q\": \"3 < 4 \\\"x\\\"\", \"s\": \"12\", \"o\": {\"a\":[1]}}"}, {"g", "{}"}}},
        Sample{ToolFormat::kDeepSeekV32,
               "<｜DSML｜invoke name=\"a b\"> is text, <｜DSML｜function_calls> too",
               "<｜DSML｜invoke name=\"a b\"> is text, <｜DSML｜function_calls> too",
               {}},
        // Harmony: analysis is reasoning, final the answer, a call's body its arguments.
        Sample{
            ToolFormat::kHarmony,
            "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
            "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
            "",
            {{"get_weather", "{\"city\": \"Paris\"}"}},
            "Need the weather."},
        Sample{ToolFormat::kHarmony,
               "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello "
               "there.",
               "Hello there.",
               {},
               "Easy."},
        Sample{ToolFormat::kHarmony, "Plain text, no channels.", "Plain text, no channels.", {}},
        // DeepSeek: text around the list is content; a marker without calls stays text.
        Sample{ToolFormat::kDeepSeekV31,
               "Let me see.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": "
               "\"<｜tool▁call▁end｜>\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜> Done.",
               "Let me see.Done.",
               {{"f", "{\"a\": \"<｜tool▁call▁end｜>\"}"}}},
        Sample{ToolFormat::kDeepSeekR1,
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": "
               "[]}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "",
               {{"f", "{\"a\": []}"}}},
        Sample{ToolFormat::kDeepSeekR1, "<｜tool▁calls▁begin｜>oops", "<｜tool▁calls▁begin｜>oops", {}},
        // Functionary.
        Sample{ToolFormat::kFunctionaryV31,
               "Sure <function=f>{\"x\": \"</function>\"}</function> ok",
               "Sure ok",
               {{"f", "{\"x\": \"</function>\"}"}}},
        Sample{ToolFormat::kFunctionaryV31, "a <function=> b", "a <function=> b", {}},
        Sample{ToolFormat::kFunctionaryV32,
               "all\nLet me look.>>>f\n{\"a\": 1}>>>g\n{}",
               "Let me look.",
               {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
        Sample{ToolFormat::kFunctionaryV32, "all\nJust text, no calls.", "Just text, no calls.", {}},
        Sample{ToolFormat::kFunctionaryV32, "hello there", "hello there", {}},
        // Command R7B: the plan is reasoning.
        Sample{ToolFormat::kCommandR7B,
               "<|START_THINKING|>I will call f.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": "
               "\"0\", "
               "\"tool_name\": \"f\", \"parameters\": {\"a\": 1}}\n]<|END_ACTION|>",
               "",
               {{"f", "{\"a\": 1}"}},
               "I will call f."},
        Sample{ToolFormat::kCommandR7B,
               "<|START_THINKING|><|END_THINKING|><|START_RESPONSE|>Hi!<|END_RESPONSE|>",
               "Hi!",
               {}},
        Sample{ToolFormat::kCommandR7B, "<|START_ACTION|>not a list", "<|START_ACTION|>not a list", {}},
        // Granite 3.x.
        Sample{ToolFormat::kGranite,
               "<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": "
               "{}}]",
               "",
               {{"f", "{\"a\": 1}"}, {"g", "{}"}}}));

// The output ended (max_tokens) at every byte of a call: the parse never throws, what it has
// is a prefix of the whole, and a call whose name is complete is reported (incomplete).
TEST(PartialOutputs, EveryTruncationIsAPrefixOfTheWhole) {
  const std::string text =
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Pa\\u00efris\"}}\n</tool_call>";
  const ToolParse whole = ParseToolCalls(ToolFormat::kHermes, text, true);
  ASSERT_EQ(whole.calls.size(), 1u);
  const size_t name_end = text.find("\"get_weather\"") + 13;
  for (size_t n = 0; n <= text.size(); ++n) {
    const ToolParse cut = ParseToolCalls(ToolFormat::kHermes, text.substr(0, n), true);
    if (n >= name_end) {
      ASSERT_EQ(cut.calls.size(), 1u) << n;
      EXPECT_TRUE(whole.calls[0].arguments.starts_with(cut.calls[0].arguments)) << n;
      EXPECT_EQ(cut.calls[0].complete, n >= text.find("}}") + 2) << n;
    } else {
      EXPECT_TRUE(cut.calls.empty()) << n;
      EXPECT_TRUE(text.substr(0, n).starts_with(cut.content)) << n;
    }
  }
}

TEST(PartialJson, PositionsAndCompleteness) {
  const std::string t = R"({"a": [1, "x\"y", {"b": null}], "c": tr)";
  PartialParse p = ParsePartialJson(t, 0);
  ASSERT_TRUE(p.root);
  EXPECT_FALSE(p.root->complete);
  EXPECT_EQ(p.invalid_at, std::string::npos);
  const PartialJson* a = p.root->Find("a");
  ASSERT_TRUE(a && a->complete);
  EXPECT_EQ(t.substr(a->start, a->end - a->start), R"([1, "x\"y", {"b": null}])");
  ASSERT_TRUE(p.root->Find("c"));
  EXPECT_FALSE(p.root->Find("c")->complete);
  for (const char* bad : {"{\"a\" 1}", "[1,]", "[01]", "{\"a\": tx}", "\"\\q\"", "[-]", "[1.]", "[1e]"})
    EXPECT_NE(ParsePartialJson(bad, 0).invalid_at, std::string::npos) << bad;
  EXPECT_NE(ParsePartialJson(std::string(100000, '['), 0).invalid_at, std::string::npos);  // depth-limited
  EXPECT_FALSE(ParsePartialJson("12", 0).root->complete);  // more digits may follow
  EXPECT_TRUE(ParsePartialJson("12 ", 0).root->complete);
}

}  // namespace
}  // namespace ferry::tool_calls
