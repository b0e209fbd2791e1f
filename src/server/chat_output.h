// ChatOutput: one chat choice's generated text split into what the API returns apart:
// reasoning (between the template's <think> and </think> tokens, found by token id, not by
// searching the text), the answer's content, and its tool calls (parsed in the model's
// format, tool_calls/). Fed the engine's outputs as they come; gives the deltas a stream sends
// and, at the end, the whole message. The same calls come out however the text was split.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tool_calls/tool_call_stream.h"

namespace ferry::server {

struct ChatOutputConfig {
  // Reasoning: the ids of <think> and </think> (both >= 0 to split), and whether the prompt
  // left the model inside a <think> block (the generation prompt opened it).
  int32_t think_open = -1;
  int32_t think_close = -1;
  bool starts_in_reasoning = false;
  std::optional<tool_calls::ToolFormat> tools;  // parse tool calls in this format
  bool reasoning() const { return think_open >= 0 && think_close >= 0; }
  bool active() const { return reasoning() || tools.has_value(); }
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  struct Call {
    size_t index = 0;
    std::string id;    // set on the call's first delta, with the name
    std::string name;  // first delta only
    std::string arguments;
  };
  std::vector<Call> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class ChatOutput {
 public:
  // piece: a token's rendered text (special tokens included), whose length places it in the
  // output text (Tokenizer::TokenToPiece(id, true) in the server).
  using PieceFn = std::function<std::string(int32_t)>;
  ChatOutput(ChatOutputConfig config, PieceFn piece);

  // The engine's new text and the tokens it came from.
  ChatDelta Push(const std::string& text, const std::vector<int32_t>& tokens);
  // The choice finished: whatever was held back.
  ChatDelta Finish();

  // The whole message so far (after Finish: final): {"content", "reasoning_content",
  // "tool_calls"} as OpenAI's message object has them (content null when only calls).
  nlohmann::ordered_json Message() const;
  bool has_calls() const { return !calls_.empty(); }

 private:
  enum class Channel { kSkip, kReasoning, kAnswer };
  void Route(std::string_view text, Channel ch, ChatDelta& d);
  void Answer(const tool_calls::StreamDelta& s, ChatDelta& d);
  void Drain(ChatDelta& d, bool final);

  ChatOutputConfig config_;
  PieceFn piece_;
  bool in_reasoning_ = false;
  std::deque<std::pair<Channel, size_t>> pending_;  // bytes each token's text will take, in order
  std::string text_;                                // engine text not yet placed
  std::optional<tool_calls::ToolCallStream> stream_;
  std::string reasoning_, content_;
  struct Call {
    std::string id, name, arguments;
  };
  std::vector<Call> calls_;
};

}  // namespace ferry::server
