// ChatPrompt with the real templates: history tool calls reach templates in the form they use
// (objects for those that tojson them, JSON text for those that concatenate them).
#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

std::unique_ptr<ChatPrompt> Prompt(const std::string& name) {
  std::ifstream in(ferry::testing::AssetPath("chat-templates/" + name + ".jinja"), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto p = ChatPrompt::Create(ModelChatTemplate{ss.str(), "<s>", "</s>"});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

// A history with one call, its arguments an object as the server's request reader leaves them.
json History() {
  return json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
}

json Tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
}

TEST(ChatPrompt, TemplatesThatConcatenateArgumentsGetJsonText) {
  FERRY_REQUIRE_ASSET("chat-templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja");
  struct Case {
    const char* tmpl;
    const char* expect;
  };
  for (const Case& c :
       {Case{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "get_weather\n```json\n{\"city\":\"Paris\"}\n```"},
        Case{"meetkai-functionary-medium-v3.2", ">>>get_weather\n{\"city\":\"Paris\"}"},
        Case{"meetkai-functionary-medium-v3.1", "<function=get_weather>{\"city\": \"Paris\"}</function>"}}) {
    auto p = Prompt(c.tmpl);
    ASSERT_TRUE(p);
    auto r = p->Render(History(), true, Tools());
    ASSERT_TRUE(r.ok()) << c.tmpl << ": " << r.status().ToString();
    EXPECT_NE(r->text.find(c.expect), std::string::npos) << c.tmpl << ":\n" << r->text;
  }
}

}  // namespace
}  // namespace ferry::server
