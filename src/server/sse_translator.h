// SseTranslator: rewrites a chat completion's OpenAI event stream ("data: {...}\n\n" ...
// "data: [DONE]\n\n") into another API's events as it is written, so that endpoints that are
// thin translations of chat (Anthropic messages, OpenAI responses) stream through the same
// Generation.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ferry::server {

class SseTranslator {
 public:
  using Write = std::function<bool(std::string_view)>;
  virtual ~SseTranslator() = default;

  // Feeds what the chat stream wrote; writes the translated events through `out`. False when
  // `out` failed (the client is gone).
  bool Feed(std::string_view data, const Write& out) {
    buffer_.append(data);
    for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
      std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      const bool ok =
          payload == "[DONE]" ? OnDone(out) : OnChunk(nlohmann::ordered_json::parse(payload), out);
      if (!ok) return false;
    }
    return true;
  }

 protected:
  // One chat chunk (or an {"error": ...} event).
  virtual bool OnChunk(const nlohmann::ordered_json& chunk, const Write& out) = 0;
  virtual bool OnDone(const Write& out) = 0;  // the chat stream's end

 private:
  std::string buffer_;  // an unfinished event
};

}  // namespace ferry::server
