// ProgressBar: a one-line progress indicator on stderr for long work (loading, writing, ppl).
// Silent when stderr is not a terminal unless forced, so logs stay clean.
#pragma once

#include <cstdint>
#include <string>

#include "base/timer.h"

namespace ferry {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled);
  ~ProgressBar();
  void Update(int64_t done, const std::string& suffix = "");
  void Finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool finished_ = false;
  int last_permille_ = -1;
  Timer timer_;
};

// True when stderr is a terminal (progress bars draw only then by default).
bool StderrIsTerminal();

}  // namespace ferry
