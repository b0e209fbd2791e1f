// Helpers for the tool-call tests: the real chat templates rendering an assistant turn with
// tool calls, and the three ways a client can receive one answer.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "template/chat_template.h"
#include "test_util.h"
#include "tool_calls/tool_call_stream.h"

namespace ferry::tool_calls::testing {

using json = nlohmann::ordered_json;

inline std::string ReadTemplate(const std::string& name) {
  std::ifstream in(ferry::testing::AssetPath("chat-templates/" + name + ".jinja"), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline json WeatherTools() {
  return json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}])");
}

// What the template renders for an assistant turn holding `calls` (OpenAI tool_calls with
// arguments as objects, content "" as the server passes a null content), up to the end-of-turn marker: the
// text a model of that family generates for those calls.
// Some templates (DeepSeek R1, Functionary v3.2) concatenate the arguments as a string and
// test `content is none`: `string_arguments` renders them that way.
inline std::string RenderedAssistantCalls(const std::string& template_name, const json& calls,
                                          bool string_arguments = false) {
  auto t = ChatTemplate::Parse(ReadTemplate(template_name));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return "";
  ChatRequest prompt;
  prompt.messages = json::array({{{"role", "user"}, {"content", "Weather in Paris and the time in Tokyo?"}}});
  prompt.add_generation_prompt = true;
  prompt.bos_token = "<s>";
  prompt.eos_token = "</s>";
  prompt.extra["tools"] = WeatherTools();
  ChatRequest full = prompt;
  full.add_generation_prompt = false;
  json turn = {{"role", "assistant"},
               {"content", string_arguments ? json() : json("")},
               {"tool_calls", json::array()}};
  int i = 0;
  for (const json& c : calls)
    turn["tool_calls"].push_back(
        {{"id", "c" + std::to_string(i++) + "abcdefg"},  // Mistral wants 9 characters
         {"type", "function"},
         {"function",
          {{"name", c["name"]},
           {"arguments", string_arguments ? json(c["arguments"].dump()) : c["arguments"]}}}});
  full.messages.push_back(turn);
  auto a = t->Render(prompt);
  auto b = t->Render(full);
  EXPECT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status().ToString() : a.status().ToString());
  if (!a.ok() || !b.ok()) return "";
  std::string head = *a;
  // Templates differ in whether the generation prompt ends the turn header with a newline.
  size_t common = 0;
  while (common < head.size() && common < b->size() && head[common] == (*b)[common]) ++common;
  // A generation prompt that opens more than the turn (QwQ's "<think>\n"): back up to its line.
  if (common < head.size())
    while (common > 0 && (*b)[common - 1] != '\n') --common;
  std::string out = b->substr(common);
  // A (thinking) block the turn opens is split off before parsing, as the server does by token id.
  if (const size_t think = out.find("</think>"); think != std::string::npos) out.erase(0, think + 8);
  // DeepSeek R1's prompt opens the thinking on the turn's line: the turn starts after its marker.
  if (const size_t turn = out.rfind("<｜Assistant｜>"); turn != std::string::npos)
    out.erase(0, turn + std::string_view("<｜Assistant｜>").size());
  for (const char* end : {"<|END_OF_TURN_TOKEN|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>",
                          "<｜end▁of▁sentence｜>", "<|end_of_text|>", "<|end|>", "<|call|>"}) {
    const size_t at = out.rfind(end);
    if (at != std::string::npos) out.resize(at);
  }
  return out;
}

// A gtest parameter name from a template's file name.
inline std::string TemplateTestName(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// Whitespace a template writes after a turn's last call (not part of what the model generates).
inline bool IsTrailer(const std::string& s) {
  return s.back() == '\n' || s.back() == ' ';
}

// The answer received three ways: whole (non-streamed), streamed in one piece, and streamed
// byte by byte; each stream's deltas are folded back into content and calls.
struct ThreeWays {
  ToolParse whole, one_piece, bytewise;
};

inline ToolParse Fold(ToolCallStream& s, const std::vector<StreamDelta>& deltas) {
  ToolParse p;
  for (const StreamDelta& d : deltas) {
    p.content += d.content;
    p.reasoning += d.reasoning;
    for (const ToolCallDelta& c : d.calls) {
      if (c.opened) {
        EXPECT_EQ(c.index, p.calls.size()) << "a call opened out of order";
        p.calls.push_back({c.name, "", false});
      }
      EXPECT_LT(c.index, p.calls.size()) << "arguments before the call's header";
      if (c.index < p.calls.size()) p.calls[c.index].arguments += c.arguments;
    }
  }
  for (size_t i = 0; i < p.calls.size() && i < s.sent().calls.size(); ++i)
    p.calls[i].complete = s.sent().calls[i].complete;
  return p;
}

inline ThreeWays Receive(ToolFormat f, const std::string& text) {
  ThreeWays r;
  r.whole = ParseToolCalls(f, text, true);
  {
    ToolCallStream s(f);
    std::vector<StreamDelta> d = {s.Push(text), s.Finish()};
    r.one_piece = Fold(s, d);
  }
  {
    ToolCallStream s(f);
    std::vector<StreamDelta> d;
    for (size_t i = 0; i < text.size(); ++i) d.push_back(s.Push(text.substr(i, 1)));
    d.push_back(s.Finish());
    r.bytewise = Fold(s, d);
  }
  // Every prefix parses to a prefix of the whole.
  for (size_t n = 0; n <= text.size(); ++n)
    EXPECT_TRUE(IsPrefixParse(ParseToolCalls(f, std::string_view(text).substr(0, n), false), r.whole))
        << "prefix of " << n << " bytes of: " << text;
  return r;
}

inline void ExpectSame(const ToolParse& a, const ToolParse& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.reasoning, b.reasoning) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
}

}  // namespace ferry::tool_calls::testing
