// BlockPool: the physical KV blocks as bookkeeping only (no tensors): reference counts, an
// intrusive O(1) free list in eviction order, and the prefix-cache map hash -> block.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace ferry::kv {

using BlockId = int32_t;

// A block is free when its ref count is 0. A free block that still holds a cached full block
// (it has a hash in the map) stays reusable by a later request with the same prefix until it
// is evicted: allocation takes never-cached free blocks first, then cached ones in LRU order
// (least recently freed first).
class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  BlockPool(BlockPool&&) = default;
  BlockPool& operator=(BlockPool&&) = default;

  int32_t num_blocks() const { return static_cast<int32_t>(nodes_.size()); }
  // Blocks with ref count 0 (cached or not): what Allocate can hand out.
  int32_t NumFree() const { return num_free_; }
  int32_t NumCached() const { return static_cast<int32_t>(cached_.size()); }
  int64_t NumEvictions() const { return evictions_; }

  // A free block with ref count 1, evicting its cached content if it had any; nullopt if none.
  std::optional<BlockId> Allocate();
  // One more reference; a free cached block is taken off the free list (a prefix-cache hit).
  void Ref(BlockId id);
  // One reference less; at 0 the block goes on the free list (cached blocks at the MRU end).
  void Unref(BlockId id);

  int32_t RefCount(BlockId id) const { return nodes_[static_cast<size_t>(id)].ref; }
  bool IsCached(BlockId id) const { return nodes_[static_cast<size_t>(id)].cached; }
  // The cached block holding the full block with this hash, if any.
  std::optional<BlockId> Find(BlockHash hash) const;
  // Registers a full, computed block under `hash` (no-op if that hash is already cached);
  // depth: its index in its sequence's chain (0: first block), handed to the eviction hook.
  void MarkCached(BlockId id, BlockHash hash, int32_t depth = 0);
  // Called with a cached block's id, hash and depth when Allocate evicts it, while its
  // content is still intact (the prefix cache's tiers copy it out then).
  using EvictHook = std::function<void(BlockId, BlockHash, int32_t depth)>;
  void SetEvictHook(EvictHook hook) { on_evict_ = std::move(hook); }

 private:
  struct Node {
    int32_t ref = 0;
    int32_t prev = -1, next = -1;  // free-list links, valid while ref == 0
    bool cached = false;
    int32_t depth = 0;
    BlockHash hash = 0;
  };
  void PushFront(BlockId id);
  void PushBack(BlockId id);
  void Unlink(BlockId id);

  std::vector<Node> nodes_;  // [num_blocks]
  int32_t head_ = -1, tail_ = -1;  // free list: head is evicted first
  int32_t num_free_ = 0;
  int64_t evictions_ = 0;
  std::unordered_map<BlockHash, BlockId> cached_;
  EvictHook on_evict_;
};

}  // namespace ferry::kv
