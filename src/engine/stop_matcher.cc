#include "engine/stop_matcher.h"

#include <algorithm>

namespace ferry {

std::string StopMatcher::Push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  // A complete stop string: emit what precedes the earliest one.
  size_t first = std::string::npos, first_len = 0;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    size_t at = held_.find(s);
    if (at != std::string::npos && at < first) first = at, first_len = s.size();
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, include_stop_ ? first + first_len : first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return "";
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace ferry
