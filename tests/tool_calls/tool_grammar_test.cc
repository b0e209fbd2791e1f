// The tool-call grammar: every family's forced-call grammar accepts exactly calls of the
// given tools whose arguments validate against their schemas, in the format the family's
// parser reads back.
#include "tool_calls/tool_grammar.h"

#include <gtest/gtest.h>

#include "constraint/grammar.h"
#include "constraint/stack_machine.h"
#include "tool_calls/tool_call_parser.h"
#include "tool_calls_test_util.h"

namespace ferry::tool_calls {
namespace {

using json = nlohmann::ordered_json;

constraint::Program Compile(const constraint::ConstraintSpec& spec) {
  auto g = constraint::BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << spec.text;
  if (!g.ok()) return {};
  auto p = constraint::Lower(*g);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : constraint::Program{};
}

bool FullMatch(const constraint::Program& p, std::string_view s) {
  constraint::StackMachine m(&p);
  int32_t state = m.Start();
  for (char c : s) state = m.Advance(state, static_cast<uint8_t>(c));
  return m.Accepts(state);
}

std::vector<ToolDef> Tools() {
  return {{"get_weather", "",
           json::parse(
               R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer",
                          "minimum": 1}}, "required": ["city"], "additionalProperties": false})")},
          {"get_time", "", json()}};
}

struct Case {
  ToolFormat format;
  bool parallel;
  std::string text;
  bool valid;
};

class ForcedGrammar : public ::testing::TestWithParam<Case> {};

TEST_P(ForcedGrammar, AcceptsValidCallsOnlyAndTheParserReadsThem) {
  const Case& c = GetParam();
  const constraint::Program p = Compile(ToolCallGrammar(c.format, Tools(), c.parallel));
  EXPECT_EQ(FullMatch(p, c.text), c.valid) << c.text;
  if (!c.valid) return;
  const ToolParse parsed = ParseToolCalls(c.format, c.text, true);
  EXPECT_EQ(parsed.content, "") << c.text;
  ASSERT_FALSE(parsed.calls.empty()) << c.text;
  for (const ToolCall& call : parsed.calls) {
    EXPECT_TRUE(call.complete);
    EXPECT_TRUE(json::accept(call.arguments)) << call.arguments;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ForcedGrammar,
    ::testing::Values(
        Case{ToolFormat::kHermes, false,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
             true},
        Case{ToolFormat::kHermes, false,
             "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"z\": [1]}}\n</tool_call>", true},
        Case{ToolFormat::kHermes, false,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>",
             false},
        Case{ToolFormat::kHermes, false,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"days\": "
             "0}}\n</tool_call>",
             false},
        Case{ToolFormat::kHermes, false,
             "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", false},
        Case{ToolFormat::kHermes, false,
             "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
             "{}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
             false},
        Case{ToolFormat::kHermes, true,
             "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
             "{}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
             true},
        Case{ToolFormat::kHermes, false,
             "Sure! <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false},
        Case{ToolFormat::kLlama3, false,
             "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 2}}", true},
        Case{ToolFormat::kLlama3, true,
             "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_time\", \"parameters\": {}}",
             true},
        Case{ToolFormat::kLlama3, false, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}",
             false},
        Case{ToolFormat::kMistralV3, true,
             "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, {\"name\": "
             "\"get_time\", \"arguments\": {}}]",
             true},
        Case{ToolFormat::kMistralV3, false, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}}]",
             false},
        Case{ToolFormat::kMistralV11, true,
             "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]get_time[ARGS]{}", true},
        Case{ToolFormat::kMistralV11, false, "[TOOL_CALLS]get_weather[ARGS]{\"city\": 3}", false},
        Case{ToolFormat::kGeneric, false,
             "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]}", true},
        Case{ToolFormat::kGeneric, false, "{\"tool_calls\": []}", false},
        // DSML: the string flag as the template writes it, values valid against their schemas.
        Case{ToolFormat::kDeepSeekV32, false,
             "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
             "name=\"city\" "
             "string=\"true\">Oslo</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
             "string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
             true},
        Case{ToolFormat::kDeepSeekV32, false,
             "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
             "name=\"city\" "
             "string=\"false\">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
             false},
        Case{ToolFormat::kDeepSeekV32, false,
             "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
             "name=\"city\" "
             "string=\"true\">Oslo</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
             "string=\"false\">0</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
             false},
        // Qwen3-Coder's XML: required parameters present, values valid against their schemas.
        Case{ToolFormat::kQwen3Coder, false,
             "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</"
             "tool_call>",
             true},
        Case{ToolFormat::kQwen3Coder, false,
             "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</"
             "tool_call>",
             false},
        Case{
            ToolFormat::kQwen3Coder, false,
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n0\n"
            "</parameter>\n</function>\n</tool_call>",
            false},
        Case{ToolFormat::kHarmony, false,
             "<|channel|>analysis<|message|>Oslo it is.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}",
             true},
        Case{ToolFormat::kHarmony, false, "<|channel|>final<|message|>Hi", false},
        Case{ToolFormat::kDeepSeekV31, false,
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"days\": "
             "2}<｜tool▁call▁end｜><｜tool▁"
             "calls▁end｜>",
             false},
        Case{ToolFormat::kGranite, false, "<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {}}]",
             true}));

// The forced grammar accepts what each family's own template renders for the calls (the
// layout the model was trained on), and the parser reads the calls back.
struct Rendered {
  const char* tmpl;
  ToolFormat format;
  bool parallel;
  bool string_arguments = false;
};

class ForcedGrammarOnTemplates : public ::testing::TestWithParam<Rendered> {};

TEST_P(ForcedGrammarOnTemplates, AcceptsTheTemplatesRendering) {
  const Rendered& r = GetParam();
  FERRY_REQUIRE_ASSET(std::string("chat-templates/") + r.tmpl + ".jinja");
  json calls = json::parse(R"([{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
                               {"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}])");
  if (!r.parallel) calls.erase(1);
  std::vector<ToolDef> tools;
  for (const auto& t : testing::WeatherTools())
    tools.push_back({t["function"]["name"], "", t["function"]["parameters"]});
  std::string text = testing::RenderedAssistantCalls(r.tmpl, calls, r.string_arguments);
  while (!text.empty() && testing::IsTrailer(text)) text.pop_back();
  const constraint::Program p = Compile(ToolCallGrammar(r.format, tools, r.parallel));
  EXPECT_TRUE(FullMatch(p, text)) << text;
  // Not another tool, nor one call too many when not parallel.
  EXPECT_FALSE(FullMatch(Compile(ToolCallGrammar(r.format, {tools[1]}, r.parallel)), text)) << text;
  if (r.parallel) {
    EXPECT_FALSE(FullMatch(Compile(ToolCallGrammar(r.format, tools, false)), text)) << text;
  }
  // tool_choice auto: the lazy grammar takes over right after the opener token.
  const std::string_view opener = CallOpener(r.format);
  if (!opener.empty() && r.format != ToolFormat::kFunctionaryV31) {
    const size_t at = text.find(opener);  // DSML: after the newlines the template writes first
    ASSERT_TRUE(at != std::string::npos && text.find_first_not_of('\n') == at) << text;
    EXPECT_TRUE(FullMatch(Compile(ToolCallGrammar(r.format, tools, r.parallel, true)),
                          text.substr(at + opener.size())))
        << text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Templates, ForcedGrammarOnTemplates,
    ::testing::Values(
        Rendered{"Qwen3-Coder", ToolFormat::kQwen3Coder, true},
        Rendered{"openai-gpt-oss-120b", ToolFormat::kHarmony, false},
        Rendered{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ToolFormat::kDeepSeekR1, true, true},
        Rendered{"deepseek-ai-DeepSeek-V3.1", ToolFormat::kDeepSeekV31, true},
        Rendered{"deepseek-ai-DeepSeek-V3.2", ToolFormat::kDeepSeekV32, true},
        Rendered{"meetkai-functionary-medium-v3.1", ToolFormat::kFunctionaryV31, true},
        Rendered{"meetkai-functionary-medium-v3.2", ToolFormat::kFunctionaryV32, true, true},
        Rendered{"CohereForAI-c4ai-command-r7b-12-2024-tool_use", ToolFormat::kCommandR7B, true},
        Rendered{"Qwen-Qwen2.5-7B-Instruct", ToolFormat::kHermes, true}),
    [](const auto& info) { return testing::TemplateTestName(info.param.tmpl); });

TEST(ForcedGrammar, AfterTheOpenerStartsPastIt) {
  const constraint::Program p =
      Compile(ToolCallGrammar(ToolFormat::kHermes, Tools(), false, /*after_opener=*/true));
  EXPECT_TRUE(FullMatch(p, "\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(FullMatch(p, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
}

TEST(ForcedGrammar, AnInvalidParametersSchemaIsAnErrorNamingIt) {
  std::vector<ToolDef> tools = {{"f", "", json::parse(R"({"type": "object", "minProperties": 1})")}};
  auto g = constraint::BuildGrammar(ToolCallGrammar(ToolFormat::kHermes, tools, false));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("minProperties"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace ferry::tool_calls
