// Serving-engine flags shared by commands that build an Engine (`ferry serve`): KV memory,
// batch limits, block size, prefix caching and batching policy, turned into an EngineConfig.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "engine/engine_core.h"

namespace ferry::cli {

struct EngineFlags {
  std::string kv_memory = "1G";
  int32_t max_batch_tokens = 512;
  int32_t max_num_seqs = 32;
  int32_t block_size = 16;
  int32_t max_model_len = 0;
  bool no_prefix_caching = false;
  std::string policy = "continuous";
  std::string prefix_cache_ram;  // bytes; empty: no RAM tier
  std::string prefix_cache_dir;
  std::string prefix_cache_disk = "8G";

  void Add(CLI::App* cmd);
  // model_path: the model file, fingerprinted when a prefix-cache tier is on.
  StatusOr<EngineConfig> ToConfig(int threads, const std::string& model_path = "") const;
};

// "2G", "512M", "1073741824" (bytes) or a fraction in (0, 1] of the available memory.
StatusOr<size_t> ParseMemorySize(const std::string& s, const char* flag);

}  // namespace ferry::cli
