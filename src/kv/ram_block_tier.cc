#include "kv/ram_block_tier.h"

#include "base/check.h"

namespace ferry::kv {

std::vector<TierBlock> RamBlockTier::Put(TierBlock block) {
  FERRY_CHECK(block.bytes != nullptr);
  std::vector<TierBlock> dropped;
  if (auto it = index_.find(block.hash); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return dropped;
  }
  const size_t n = block.bytes->size();
  if (n > capacity_) {
    dropped.push_back(std::move(block));
    return dropped;
  }
  while (bytes_ + n > capacity_) {
    TierBlock& oldest = lru_.back();
    bytes_ -= oldest.bytes->size();
    index_.erase(oldest.hash);
    dropped.push_back(std::move(oldest));
    lru_.pop_back();
  }
  bytes_ += n;
  lru_.push_front(std::move(block));
  index_.emplace(lru_.front().hash, lru_.begin());
  return dropped;
}

BlockBytes RamBlockTier::Get(BlockHash hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->bytes;
}

}  // namespace ferry::kv
