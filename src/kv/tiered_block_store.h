// TieredBlockStore: where full KV blocks go when the KV pool evicts them, so a later request
// with the same prefix restores them by copy instead of recomputing them: a host-RAM tier
// (LRU under --prefix-cache-ram) and below it an optional disk tier (--prefix-cache-dir) that
// receives what RAM drops. Keys are chained block hashes; the disk tier's files also carry a
// fingerprint of the model and KV layout, so another model or KV type never hits.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "kv/disk_block_tier.h"
#include "kv/ram_block_tier.h"

namespace ferry::kv {

struct PrefixTierConfig {
  size_t ram_bytes = 0;  // host-RAM tier capacity (0: none)
  std::string disk_dir;  // disk tier directory (empty: none)
  size_t disk_bytes = size_t{8} << 30;
  uint64_t fingerprint = 0;  // of the model file and the KV layout; keys the disk files
  // Measure a disk read against a recompute at start-up (false: keep every block RAM drops on
  // disk; tests, whose outcome must not depend on timing).
  bool price_disk = true;
  bool enabled() const { return ram_bytes > 0 || !disk_dir.empty(); }
};

// Whether a block is worth keeping on disk: reading it back must be faster than recomputing it.
// Recomputing the block at chain index `depth` costs about base + depth * per_depth seconds for
// the whole model (its tokens attend over every earlier block); both are measured at start-up.
// A block holds one KV group's layers (model/kv_group_layout.h: every group has as many), so it
// stands for `recompute_share` = its layers / all layers of that recompute: 1 without sliding
// groups, 1 / groups with them.
struct DiskCostModel {
  double read_s = 0;  // seconds to read one block's file back (not in the page cache)
  double recompute_base_s = std::numeric_limits<double>::infinity();
  double recompute_per_depth_s = 0;
  double recompute_share = 1;
  double RecomputeSeconds(int32_t depth) const {
    return recompute_share * (recompute_base_s + depth * recompute_per_depth_s);
  }
  bool WorthIt(int32_t depth) const { return read_s < RecomputeSeconds(depth); }
};

enum class BlockTier { kRam, kDisk };

struct TierStats {
  size_t ram_bytes = 0, disk_bytes = 0;  // held now
  int64_t ram_blocks = 0, disk_blocks = 0;
  int64_t offloaded = 0;      // blocks the pool handed down
  int64_t disk_writes = 0;    // block files written
  int64_t disk_skipped = 0;   // blocks RAM dropped that were cheaper to recompute than to read
  int64_t disk_errors = 0;    // writes that failed (logged)
  int64_t disk_rejected = 0;  // damaged or foreign files deleted
};

class TieredBlockStore {
 public:
  // Fails if the disk directory cannot be created or listed.
  static StatusOr<std::unique_ptr<TieredBlockStore>> Create(const PrefixTierConfig& config);

  const PrefixTierConfig& config() const { return config_; }
  bool has_disk() const { return disk_.has_value(); }
  void SetDiskCost(const DiskCostModel& cost) { disk_cost_ = cost; }
  const DiskCostModel& disk_cost() const { return disk_cost_; }

  // Refreshes a block the RAM tier already holds (true), so the pool need not copy it again.
  bool Refresh(BlockHash hash) { return ram_.Get(hash) != nullptr; }
  // Keeps an evicted block in RAM; what RAM drops to make room goes to disk when worth it.
  void Offload(TierBlock block);
  // The block's bytes from RAM, else from disk (then kept in RAM again), with the tier that
  // had it; nullopt on a miss.
  struct Fetched {
    BlockBytes bytes;
    BlockTier tier;
  };
  std::optional<Fetched> Fetch(BlockHash hash);

  TierStats stats() const;

 private:
  explicit TieredBlockStore(const PrefixTierConfig& config) : config_(config), ram_(config.ram_bytes) {}
  void Spill(std::vector<TierBlock> dropped);

  PrefixTierConfig config_;
  RamBlockTier ram_;
  std::optional<DiskBlockTier> disk_;
  DiskCostModel disk_cost_;  // infinite recompute cost until measured: everything is worth it
  TierStats counters_;
};

}  // namespace ferry::kv
