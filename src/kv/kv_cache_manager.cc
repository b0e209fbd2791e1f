#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace ferry::kv {

KvSequence& KvSequence::operator=(KvSequence&& o) noexcept {
  if (this != &o) {
    Release();
    mgr_ = std::exchange(o.mgr_, nullptr);
    blocks_ = std::move(o.blocks_);
    hashes_ = std::move(o.hashes_);
    num_slots_ = std::exchange(o.num_slots_, 0);
    o.blocks_.clear();
    o.hashes_.clear();
  }
  return *this;
}

void KvSequence::Release() {
  if (mgr_) mgr_->Free(*this);
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config) : config_(config), pool_(config.num_blocks) {
  FERRY_CHECK(config.block_size > 0);
}

double KvCacheManager::Usage() const {
  if (num_blocks() == 0) return 0.0;
  return 1.0 - static_cast<double>(pool_.NumFree()) / num_blocks();
}

namespace {

// The chain of full-block hashes of tokens, block by block (never the block of the last token:
// its logits must be computed); take(hash, hit) adds that block to hit, or returns false to end
// the prefix there.
template <typename Take>
PrefixHit WalkPrefix(std::span<const int32_t> tokens, const KvCacheConfig& config, Take&& take) {
  PrefixHit hit;
  if (!config.prefix_caching || tokens.empty()) return hit;
  const size_t bs = static_cast<size_t>(config.block_size);
  const size_t max_blocks = (tokens.size() - 1) / bs;
  BlockHash parent = kRootBlockHash;
  for (size_t i = 0; i < max_blocks; ++i) {
    const BlockHash h = HashBlock(parent, tokens.subspan(i * bs, bs));
    if (!take(h, hit)) break;
    hit.hashes.push_back(h);
    parent = h;
  }
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size() * bs);
  return hit;
}

}  // namespace

PrefixHit KvCacheManager::FindCachedPrefix(std::span<const int32_t> tokens) const {
  return WalkPrefix(tokens, config_, [&](BlockHash h, PrefixHit& hit) {
    auto id = pool_.Find(h);
    if (id) hit.blocks.push_back(*id);
    return id.has_value();
  });
}

PrefixHit KvCacheManager::FindPrefix(std::span<const int32_t> tokens) {
  if (!tiers_) return FindCachedPrefix(tokens);
  return WalkPrefix(tokens, config_, [&](BlockHash h, PrefixHit& hit) {
    if (auto id = pool_.Find(h)) {
      hit.blocks.push_back(*id);
      return true;
    }
    auto fetched = tiers_->Fetch(h);
    // A block of another size (e.g. stored before the INT8 key copy was enabled) is a miss.
    if (!fetched || fetched->bytes->size() != content_->BlockBytes()) return false;
    hit.restores.push_back({hit.blocks.size(), std::move(fetched->bytes), fetched->tier});
    hit.blocks.push_back(kTierBlock);
    return true;
  });
}

void KvCacheManager::AttachTiers(TieredBlockStore* store, BlockContent* content) {
  FERRY_CHECK((store == nullptr) == (content == nullptr));
  tiers_ = store;
  content_ = content;
  if (store) {
    pool_.SetEvictHook([this](BlockId id, BlockHash hash, int32_t depth) { OnEvict(id, hash, depth); });
  } else {
    pool_.SetEvictHook(nullptr);
  }
}

void KvCacheManager::OnEvict(BlockId id, BlockHash hash, int32_t depth) {
  if (tiers_->Refresh(hash)) return;  // restored from RAM earlier: the same bytes are there
  auto bytes = std::make_shared<std::vector<uint8_t>>(content_->BlockBytes());
  content_->Read(id, bytes->data());
  tiers_->Offload({hash, depth, std::move(bytes)});
}

std::optional<SlotAllocation> KvCacheManager::AllocateSlots(KvSequence& seq, int32_t num_slots, const PrefixHit* hit) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  const bool take_hit = hit && !hit->blocks.empty() && seq.blocks_.empty();
  const int32_t have = static_cast<int32_t>(seq.blocks_.size()) + (take_hit ? static_cast<int32_t>(hit->blocks.size()) : 0);
  const int32_t need = BlocksFor(num_slots);
  // Appending into a partial last block that another sequence shares needs a private copy; so
  // does one registered in the prefix cache (a full block made partial by Truncate).
  const bool cow = num_slots > seq.num_slots_ && seq.num_slots_ % config_.block_size != 0 &&
                   (pool_.RefCount(seq.blocks_.back()) > 1 || pool_.IsCached(seq.blocks_.back()));
  int32_t fresh = std::max(0, need - have) + (cow ? 1 : 0);
  int32_t revived = 0;  // hit blocks that are free now (they count against NumFree)
  if (take_hit) {
    for (BlockId b : hit->blocks) revived += b != kTierBlock && pool_.RefCount(b) == 0 ? 1 : 0;
    fresh += static_cast<int32_t>(hit->restores.size());
  }
  if (fresh + revived > pool_.NumFree()) return std::nullopt;

  seq.mgr_ = this;
  SlotAllocation out;
  if (take_hit) {
    for (BlockId b : hit->blocks)
      if (b != kTierBlock) pool_.Ref(b);  // before Allocate, so they are not evicted
    seq.blocks_ = hit->blocks;
    seq.hashes_ = hit->hashes;
    seq.num_slots_ = hit->num_tokens;
    for (const TierRestore& r : hit->restores) {  // copy back: no recompute
      FERRY_CHECK(tiers_ && seq.blocks_[r.index] == kTierBlock && r.bytes->size() == content_->BlockBytes());
      BlockId dst = *pool_.Allocate();
      content_->Write(dst, r.bytes->data());
      pool_.MarkCached(dst, hit->hashes[r.index], static_cast<int32_t>(r.index));
      seq.blocks_[r.index] = dst;
      ++restored_[static_cast<size_t>(r.tier)];
    }
  }
  if (cow) {
    BlockId dst = *pool_.Allocate();
    out.copies.push_back({seq.blocks_.back(), dst});
    pool_.Unref(seq.blocks_.back());
    seq.blocks_.back() = dst;
  }
  while (static_cast<int32_t>(seq.blocks_.size()) < need) {
    seq.blocks_.push_back(*pool_.Allocate());
    ++out.new_blocks;
  }
  seq.num_slots_ = std::max(seq.num_slots_, num_slots);
  return out;
}

void KvCacheManager::CacheFullBlocks(KvSequence& seq, std::span<const int32_t> tokens, int32_t num_computed) {
  if (!config_.prefix_caching) return;
  const size_t bs = static_cast<size_t>(config_.block_size);
  const size_t full = std::min(static_cast<size_t>(num_computed) / bs, seq.blocks_.size());
  FERRY_CHECK(static_cast<size_t>(num_computed) <= tokens.size());
  for (size_t i = seq.hashes_.size(); i < full; ++i) {
    BlockHash parent = i == 0 ? kRootBlockHash : seq.hashes_[i - 1];
    BlockHash h = HashBlock(parent, tokens.subspan(i * bs, bs));
    seq.hashes_.push_back(h);
    pool_.MarkCached(seq.blocks_[i], h, static_cast<int32_t>(i));
  }
}

KvSequence KvCacheManager::Fork(const KvSequence& parent) {
  KvSequence child;
  child.mgr_ = this;
  child.blocks_ = parent.blocks_;
  child.hashes_ = parent.hashes_;
  child.num_slots_ = parent.num_slots_;
  for (BlockId b : child.blocks_) pool_.Ref(b);
  return child;
}

void KvCacheManager::Free(KvSequence& seq) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  for (auto it = seq.blocks_.rbegin(); it != seq.blocks_.rend(); ++it) pool_.Unref(*it);
  seq.blocks_.clear();
  seq.hashes_.clear();
  seq.num_slots_ = 0;
  seq.mgr_ = nullptr;
}

void KvCacheManager::Truncate(KvSequence& seq, int32_t num_slots) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  FERRY_CHECK(num_slots >= 0 && num_slots <= seq.num_slots_);
  const size_t keep = static_cast<size_t>(BlocksFor(num_slots));
  while (seq.blocks_.size() > keep) {
    pool_.Unref(seq.blocks_.back());
    seq.blocks_.pop_back();
  }
  const size_t full = static_cast<size_t>(num_slots / config_.block_size);
  if (seq.hashes_.size() > full) seq.hashes_.resize(full);
  seq.num_slots_ = num_slots;
  if (seq.blocks_.empty()) seq.mgr_ = nullptr;
}

}  // namespace ferry::kv
