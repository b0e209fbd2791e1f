#include "server/chat_output.h"

#include <fmt/format.h>

#include <random>

namespace ferry::server {
namespace {

std::string NewCallId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

}  // namespace

ChatOutput::ChatOutput(ChatOutputConfig config, PieceFn piece)
    : config_(std::move(config)),
      piece_(std::move(piece)),
      in_reasoning_(config_.reasoning() && config_.starts_in_reasoning) {
  if (config_.tools) stream_.emplace(*config_.tools);
}

void ChatOutput::Answer(const tool_calls::StreamDelta& s, ChatDelta& d) {
  d.content += s.content;
  content_ += s.content;
  d.reasoning += s.reasoning;
  reasoning_ += s.reasoning;
  for (const tool_calls::ToolCallDelta& c : s.calls) {
    ChatDelta::Call out{c.index, "", "", c.arguments};
    if (c.opened) {
      calls_.push_back({NewCallId(), c.name, ""});
      out.id = calls_.back().id;
      out.name = c.name;
    }
    calls_[c.index].arguments += c.arguments;
    d.calls.push_back(std::move(out));
  }
}

void ChatOutput::Route(std::string_view text, Channel ch, ChatDelta& d) {
  if (text.empty() || ch == Channel::kSkip) return;
  if (ch == Channel::kReasoning) {
    d.reasoning += text;
    reasoning_ += text;
  } else if (stream_) {
    Answer(stream_->Push(text), d);
  } else {
    d.content += text;
    content_ += text;
  }
}

// Places the engine's text by the tokens it came from: each token's rendered piece takes its
// length in bytes of the text, in order (the text lags the tokens while a UTF-8 character or
// a stop string is pending).
void ChatOutput::Drain(ChatDelta& d, bool final) {
  size_t used = 0;
  while (!pending_.empty() && used < text_.size()) {
    auto& [ch, bytes] = pending_.front();
    const size_t take = std::min(bytes, text_.size() - used);
    Route(std::string_view(text_).substr(used, take), ch, d);
    used += take;
    bytes -= take;
    if (bytes == 0) pending_.pop_front();
  }
  // Text the tokens do not account for (a sanitized byte sequence): where the model is now.
  if (final || pending_.empty()) {
    Route(std::string_view(text_).substr(used), in_reasoning_ ? Channel::kReasoning : Channel::kAnswer, d);
    used = text_.size();
  }
  text_.erase(0, used);
}

ChatDelta ChatOutput::Push(const std::string& text, const std::vector<int32_t>& tokens) {
  ChatDelta d;
  if (!config_.reasoning()) {
    Route(text, Channel::kAnswer, d);
    return d;
  }
  for (int32_t id : tokens) {
    Channel ch;
    if (id == config_.think_open) {
      in_reasoning_ = true;
      ch = Channel::kSkip;
    } else if (id == config_.think_close) {
      in_reasoning_ = false;
      ch = Channel::kSkip;
    } else {
      ch = in_reasoning_ ? Channel::kReasoning : Channel::kAnswer;
    }
    const size_t bytes = piece_ ? piece_(id).size() : 0;
    if (bytes > 0) pending_.emplace_back(ch, bytes);
  }
  text_ += text;
  Drain(d, false);
  return d;
}

ChatDelta ChatOutput::Finish() {
  ChatDelta d;
  Drain(d, true);
  pending_.clear();
  if (stream_) Answer(stream_->Finish(), d);
  return d;
}

nlohmann::ordered_json ChatOutput::Message() const {
  nlohmann::ordered_json m = {{"role", "assistant"}};
  m["content"] = calls_.empty() || !content_.empty() ? nlohmann::ordered_json(content_) : nullptr;
  if (config_.reasoning() || !reasoning_.empty())
    m["reasoning_content"] =
        reasoning_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(reasoning_);
  if (!calls_.empty()) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const Call& c : calls_)
      calls.push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

}  // namespace ferry::server
