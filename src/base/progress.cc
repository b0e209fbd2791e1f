#include "base/progress.h"

#include <unistd.h>

#include <cstdio>

namespace ferry {

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total > 0 ? total : 1), enabled_(enabled) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done, const std::string& suffix) {
  if (!enabled_ || finished_) return;
  int permille = static_cast<int>(done * 1000 / total_);
  if (permille == last_permille_ && suffix.empty()) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  int filled = permille * kWidth / 1000;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %.1fs %s", label_.c_str(), bar.c_str(), permille / 10.0,
               timer_.Seconds(), suffix.c_str());
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (!enabled_ || finished_) return;
  Update(total_);
  finished_ = true;
  std::fputc('\n', stderr);
}

}  // namespace ferry
