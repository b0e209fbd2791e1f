#include "engine_flags.h"

#include <fstream>

#include "kv/block_file.h"

namespace ferry::cli {

StatusOr<size_t> ParseMemorySize(const std::string& s, const char* flag) {
  double v = 0;
  size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    return InvalidArgumentError("{} '{}': expected bytes (2G, 512M) or a fraction of free RAM", flag, s);
  }
  const std::string suffix = s.substr(used);
  if (suffix.empty() && v > 0 && v <= 1.0) {
    std::ifstream in("/proc/meminfo");
    std::string key;
    size_t kb = 0;
    while (in >> key >> kb) {
      if (key == "MemAvailable:") return static_cast<size_t>(v * static_cast<double>(kb) * 1024.0);
      in.ignore(256, '\n');
    }
    return InvalidArgumentError("{} {}: cannot read MemAvailable from /proc/meminfo; give bytes", flag, s);
  }
  double mul = 1;
  if (suffix == "K" || suffix == "k")
    mul = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mul = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mul = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return InvalidArgumentError("{} '{}': unknown suffix '{}'", flag, s, suffix);
  if (v <= 0) return InvalidArgumentError("{} must be positive", flag);
  return static_cast<size_t>(v * mul);
}

void EngineFlags::Add(CLI::App* cmd) {
  cmd->add_option("--kv-cache-memory", kv_memory, "KV cache size: bytes (2G, 512M) or fraction of free RAM")
      ->capture_default_str();
  cmd->add_option("--max-batch-tokens", max_batch_tokens, "tokens per engine step (decodes + prefill chunks)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-seqs", max_num_seqs, "sequences per step (also the largest n)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-size", block_size, "tokens per KV block")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-len", max_model_len, "positions per sequence (default: the model's context)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-prefix-caching", no_prefix_caching, "disable automatic prefix caching");
  cmd->add_option("--policy", policy, "continuous | static batching")->capture_default_str();
  cmd->add_option("--prefix-cache-ram", prefix_cache_ram,
                  "keep prefix-cache blocks the KV pool evicts in host RAM, up to BYTES (2G, 512M)")
      ->group("Prefix cache tiers");
  cmd->add_option("--prefix-cache-dir", prefix_cache_dir,
                  "then on disk in DIR (kept across restarts; blocks cheaper to recompute stay off)")
      ->group("Prefix cache tiers");
  cmd->add_option("--prefix-cache-disk", prefix_cache_disk,
                  "bytes of block files in --prefix-cache-dir at most")
      ->capture_default_str()
      ->group("Prefix cache tiers");
}

StatusOr<EngineConfig> EngineFlags::ToConfig(int threads, const std::string& model_path) const {
  FERRY_ASSIGN_OR_RETURN(size_t kv_bytes, ParseMemorySize(kv_memory, "--kv-cache-memory"));
  if (policy != "continuous" && policy != "static")
    return InvalidArgumentError("--policy '{}': expected continuous or static", policy);
  EngineConfig ec;
  ec.block_size = block_size;
  ec.kv_cache_bytes = kv_bytes;
  ec.prefix_caching = !no_prefix_caching;
  ec.threads = threads;
  ec.scheduler.max_batch_tokens = max_batch_tokens;
  ec.scheduler.max_num_seqs = max_num_seqs;
  ec.scheduler.max_seq_len = max_model_len;
  ec.scheduler.policy = policy == "static" ? BatchPolicy::kStatic : BatchPolicy::kContinuous;
  if (!prefix_cache_ram.empty()) {
    FERRY_ASSIGN_OR_RETURN(ec.prefix_tiers.ram_bytes,
                           ParseMemorySize(prefix_cache_ram, "--prefix-cache-ram"));
  }
  ec.prefix_tiers.disk_dir = prefix_cache_dir;
  FERRY_ASSIGN_OR_RETURN(ec.prefix_tiers.disk_bytes,
                         ParseMemorySize(prefix_cache_disk, "--prefix-cache-disk"));
  if (ec.prefix_tiers.enabled()) {
    if (model_path.empty())
      return InvalidArgumentError("--prefix-cache-ram/--prefix-cache-dir need the model file");
    FERRY_ASSIGN_OR_RETURN(ec.prefix_tiers.fingerprint, kv::FingerprintFile(model_path));
  }
  return ec;
}

}  // namespace ferry::cli
