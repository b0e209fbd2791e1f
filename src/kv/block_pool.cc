#include "kv/block_pool.h"

#include "base/check.h"

namespace ferry::kv {

BlockPool::BlockPool(int32_t num_blocks) : nodes_(static_cast<size_t>(num_blocks)) {
  FERRY_CHECK(num_blocks >= 0);
  for (BlockId i = 0; i < num_blocks; ++i) PushBack(i);
}

void BlockPool::PushFront(BlockId id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.prev = -1;
  n.next = head_;
  if (head_ >= 0) nodes_[static_cast<size_t>(head_)].prev = id;
  head_ = id;
  if (tail_ < 0) tail_ = id;
  ++num_free_;
}

void BlockPool::PushBack(BlockId id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.next = -1;
  n.prev = tail_;
  if (tail_ >= 0) nodes_[static_cast<size_t>(tail_)].next = id;
  tail_ = id;
  if (head_ < 0) head_ = id;
  ++num_free_;
}

void BlockPool::Unlink(BlockId id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  if (n.prev >= 0) nodes_[static_cast<size_t>(n.prev)].next = n.next; else head_ = n.next;
  if (n.next >= 0) nodes_[static_cast<size_t>(n.next)].prev = n.prev; else tail_ = n.prev;
  n.prev = n.next = -1;
  --num_free_;
}

std::optional<BlockId> BlockPool::Allocate() {
  if (head_ < 0) return std::nullopt;
  BlockId id = head_;
  Unlink(id);
  Node& n = nodes_[static_cast<size_t>(id)];
  if (n.cached) {  // evict: the content is about to be overwritten
    auto it = cached_.find(n.hash);
    FERRY_CHECK(it != cached_.end() && it->second == id);
    cached_.erase(it);
    n.cached = false;
    ++evictions_;
    if (on_evict_) on_evict_(id, n.hash, n.depth);
  }
  n.ref = 1;
  return id;
}

void BlockPool::Ref(BlockId id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  if (n.ref == 0) {
    FERRY_CHECK(n.cached);  // only cached free blocks can be revived
    Unlink(id);
  }
  ++n.ref;
}

void BlockPool::Unref(BlockId id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  FERRY_CHECK(n.ref > 0);
  if (--n.ref > 0) return;
  if (n.cached) {
    PushBack(id);  // most recently used: evicted last
  } else {
    PushFront(id);  // holds nothing reusable: hand it out first
  }
}

std::optional<BlockId> BlockPool::Find(BlockHash hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::MarkCached(BlockId id, BlockHash hash, int32_t depth) {
  Node& n = nodes_[static_cast<size_t>(id)];
  FERRY_CHECK(n.ref > 0);
  if (n.cached) return;
  if (!cached_.emplace(hash, id).second) return;  // same content already cached elsewhere
  n.cached = true;
  n.hash = hash;
  n.depth = depth;
}

}  // namespace ferry::kv
