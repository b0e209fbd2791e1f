// Response ids (`chatcmpl-…`, `resp_…`, Anthropic's `msg_…`): a prefix and 64 random bits, as
// the APIs' own ids look; unique enough for clients that key on them, not a secret.
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>

namespace ferry::server {

inline std::string NewResponseId(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}", prefix, rng());
}

}  // namespace ferry::server
