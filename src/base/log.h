// Minimal leveled logging to stderr (spdlog would pull a second fmt; this keeps one).
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace ferry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
LogLevel GetLogLevel();
void SetLogLevel(LogLevel level);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < GetLogLevel()) return;
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  std::string msg = fmt::format(f, std::forward<Args>(args)...);
  std::fprintf(stderr, "ferry %s: %s\n", kNames[static_cast<int>(level)], msg.c_str());
}

}  // namespace ferry
