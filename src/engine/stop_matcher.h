// StopMatcher: finds stop strings in streamed text without ever emitting part of one, also
// when a stop string is split across tokens.
#pragma once

#include <string>
#include <vector>

namespace ferry {

class StopMatcher {
 public:
  // include_stop: the matched stop string is emitted as the text's end (vLLM's
  // include_stop_str_in_output) instead of being cut.
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false)
      : stops_(std::move(stops)), include_stop_(include_stop) {}

  // Feeds new text; returns the text that is now safe to emit (it cannot be the start of a
  // stop string). After a stop string is found, stopped() is true and the text before it
  // has been returned; nothing after it is.
  std::string Push(const std::string& text);
  // At the end of generation: whatever was held back.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_ = false;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ferry
