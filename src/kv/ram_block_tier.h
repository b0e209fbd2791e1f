// RamBlockTier: the prefix cache's host-RAM tier. Full KV blocks evicted from the KV pool are
// kept here as bytes, keyed by their chained block hash, in LRU order under a byte budget.
// Entries are shared, immutable byte buffers, so a reader (a restore in progress) keeps its
// copy alive even when the tier drops the entry meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace ferry::kv {

using BlockBytes = std::shared_ptr<const std::vector<uint8_t>>;

// A block with its position in its chain (0: the first block of a prompt), which prices its
// recomputation (later blocks attend over more tokens).
struct TierBlock {
  BlockHash hash = 0;
  int32_t depth = 0;
  BlockBytes bytes;
};

class RamBlockTier {
 public:
  explicit RamBlockTier(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  size_t capacity_bytes() const { return capacity_; }
  size_t bytes() const { return bytes_; }  // payload bytes held
  size_t size() const { return lru_.size(); }
  bool Contains(BlockHash hash) const { return index_.count(hash) != 0; }

  // Inserts `block` as most recently used (an entry already held is only refreshed) and
  // returns the least recently used entries dropped to stay within capacity, oldest first
  // (the caller may spill them to disk). A block larger than the whole tier is returned at once.
  std::vector<TierBlock> Put(TierBlock block);
  // The entry for hash (refreshed to most recently used), or null.
  BlockBytes Get(BlockHash hash);

 private:
  size_t capacity_;
  size_t bytes_ = 0;
  std::list<TierBlock> lru_;  // front: most recently used
  std::unordered_map<BlockHash, std::list<TierBlock>::iterator> index_;
};

}  // namespace ferry::kv
