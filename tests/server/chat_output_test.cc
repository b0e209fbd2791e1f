// ChatOutput: reasoning split from the answer by token id (not by the text), tool calls parsed
// from the answer only, and the same message whether the engine's text came in one piece or
// lagging the tokens (UTF-8 and stop-string hold-back).
#include "server/chat_output.h"

#include <gtest/gtest.h>

#include <map>

namespace ferry::server {
namespace {

// A toy vocabulary: 1 = <think>, 2 = </think>, others their listed text.
const std::map<int32_t, std::string> kVocab = {{1, "<think>"},
                                               {2, "</think>"},
                                               {3, "Let"},
                                               {4, " me"},
                                               {5, " think"},
                                               {6, "\n\n"},
                                               {7, "Hi"},
                                               {8, "<"},
                                               {9, "think"},
                                               {10, ">"},
                                               {11, "<tool_call>"},
                                               {12, "\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"},
                                               {13, "</tool_call>"},
                                               {14, "é"},
                                               {15, "<|channel|>"},
                                               {16, "analysis"},
                                               {17, "<|message|>"},
                                               {18, "<|end|>"},
                                               {19, "<|start|>assistant"},
                                               {20, "commentary to=functions.f json"}};

ChatOutput::PieceFn Pieces() {
  return [](int32_t id) { return kVocab.at(id); };
}

ChatOutputConfig Thinking(bool starts_in_reasoning = false) {
  ChatOutputConfig c;
  c.think_open = 1;
  c.think_close = 2;
  c.starts_in_reasoning = starts_in_reasoning;
  return c;
}

std::string Text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += kVocab.at(id);
  return s;
}

// Feeds the tokens one output per token; the text lags by `lag` bytes (as when a character
// is incomplete), then the message.
nlohmann::ordered_json Feed(const ChatOutputConfig& c, const std::vector<int32_t>& ids, size_t lag,
                            std::string* streamed_reasoning = nullptr,
                            std::string* streamed_content = nullptr) {
  ChatOutput out(c, Pieces());
  const std::string all = Text(ids);
  size_t sent = 0, produced = 0;
  std::string reasoning, content;
  for (int32_t id : ids) {
    produced += kVocab.at(id).size();
    const size_t upto = produced > lag ? produced - lag : 0;
    ChatDelta d = out.Push(all.substr(sent, upto > sent ? upto - sent : 0), {id});
    sent = std::max(sent, upto);
    reasoning += d.reasoning;
    content += d.content;
  }
  ChatDelta d = out.Push(all.substr(sent), {});
  ChatDelta f = out.Finish();
  reasoning += d.reasoning + f.reasoning;
  content += d.content + f.content;
  if (streamed_reasoning) *streamed_reasoning = reasoning;
  if (streamed_content) *streamed_content = content;
  return out.Message();
}

TEST(ChatOutput, ReasoningIsSplitByTokenId) {
  const std::vector<int32_t> ids = {1, 3, 4, 5, 2, 6, 7};
  for (size_t lag : {0, 1, 5, 100}) {
    std::string r, c;
    nlohmann::ordered_json m = Feed(Thinking(), ids, lag, &r, &c);
    EXPECT_EQ(m["reasoning_content"], "Let me think") << lag;
    EXPECT_EQ(m["content"], "\n\nHi") << lag;
    EXPECT_EQ(r, "Let me think") << lag;
    EXPECT_EQ(c, "\n\nHi") << lag;
  }
}

TEST(ChatOutput, ThinkTagsWrittenAsTextAreNotReasoning) {
  // "<", "think", ">" spell the tag without being the token: it stays content.
  nlohmann::ordered_json m = Feed(Thinking(), {8, 9, 10, 3, 4}, 2);
  EXPECT_TRUE(m["reasoning_content"].is_null()) << m.dump();
  EXPECT_EQ(m["content"], "<think>Let me");
}

TEST(ChatOutput, APromptThatOpenedTheBlockStartsInReasoning) {
  nlohmann::ordered_json m = Feed(Thinking(/*starts_in_reasoning=*/true), {3, 4, 2, 7, 14}, 1);
  EXPECT_EQ(m["reasoning_content"], "Let me");
  EXPECT_EQ(m["content"], "Hié");
  m = Feed(Thinking(true), {3, 4}, 0);  // cut off while thinking
  EXPECT_EQ(m["reasoning_content"], "Let me");
  EXPECT_EQ(m["content"], "");
}

TEST(ChatOutput, ToolCallsAreParsedFromTheAnswerOnly) {
  ChatOutputConfig c = Thinking();
  c.tools = tool_calls::ToolFormat::kHermes;
  for (size_t lag : {0, 3}) {
    nlohmann::ordered_json m = Feed(c, {1, 3, 11, 2, 6, 11, 12, 13}, lag);
    EXPECT_EQ(m["reasoning_content"], "Let<tool_call>") << m.dump();
    EXPECT_TRUE(m["content"].is_null()) << m.dump();
    ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
    EXPECT_TRUE(m["tool_calls"][0]["id"].get<std::string>().starts_with("call_"));
  }
}

// gpt-oss: the analysis channel is reasoning without any <think> tokens (the format's parser
// splits it), streamed and in the message alike.
TEST(ChatOutput, HarmonyAnalysisChannelIsReasoning) {
  ChatOutputConfig c;
  c.tools = tool_calls::ToolFormat::kHarmony;
  const std::vector<int32_t> ids = {15, 16, 17, 3, 4, 5, 18, 19, 15, 20, 17, 12};
  for (size_t lag : {0, 4}) {
    std::string r, t;
    nlohmann::ordered_json m = Feed(c, ids, lag, &r, &t);
    EXPECT_EQ(m["reasoning_content"], "Let me think") << m.dump();
    EXPECT_EQ(r, "Let me think");
    EXPECT_TRUE(m["content"].is_null()) << m.dump();
    ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  }
}

}  // namespace
}  // namespace ferry::server
