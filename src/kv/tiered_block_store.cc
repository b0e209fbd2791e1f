#include "kv/tiered_block_store.h"

#include "base/log.h"

namespace ferry::kv {

StatusOr<std::unique_ptr<TieredBlockStore>> TieredBlockStore::Create(const PrefixTierConfig& config) {
  std::unique_ptr<TieredBlockStore> s(new TieredBlockStore(config));
  if (!config.disk_dir.empty()) {
    FERRY_ASSIGN_OR_RETURN(DiskBlockTier disk,
                           DiskBlockTier::Open({config.disk_dir, config.disk_bytes, config.fingerprint}));
    s->disk_ = std::move(disk);
  }
  return s;
}

void TieredBlockStore::Offload(TierBlock block) {
  ++counters_.offloaded;
  Spill(ram_.Put(std::move(block)));
}

void TieredBlockStore::Spill(std::vector<TierBlock> dropped) {
  if (!disk_) return;
  for (const TierBlock& b : dropped) {
    if (disk_->Contains(b.hash)) continue;  // read from disk earlier: the file is still there
    if (!disk_cost_.WorthIt(b.depth)) {
      ++counters_.disk_skipped;
      continue;
    }
    if (Status st = disk_->Put(b.hash, *b.bytes); !st.ok()) {
      ++counters_.disk_errors;
      Log(LogLevel::kWarn, "prefix cache: {}", st.message());
      continue;
    }
    ++counters_.disk_writes;
  }
}

std::optional<TieredBlockStore::Fetched> TieredBlockStore::Fetch(BlockHash hash) {
  if (BlockBytes b = ram_.Get(hash)) return Fetched{std::move(b), BlockTier::kRam};
  if (!disk_) return std::nullopt;
  BlockBytes b = disk_->Get(hash);
  if (!b) return std::nullopt;
  // Hot again: keep it in RAM too (depth unknown for a file from an earlier run; 0 is the
  // conservative price when RAM drops it again, and its file is still on disk anyway).
  Spill(ram_.Put({hash, 0, b}));
  return Fetched{std::move(b), BlockTier::kDisk};
}

TierStats TieredBlockStore::stats() const {
  TierStats s = counters_;
  s.ram_bytes = ram_.bytes();
  s.ram_blocks = static_cast<int64_t>(ram_.size());
  if (disk_) {
    s.disk_bytes = disk_->bytes();
    s.disk_blocks = static_cast<int64_t>(disk_->size());
    s.disk_rejected = disk_->rejected();
  }
  return s;
}

}  // namespace ferry::kv
