#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace ferry::kv {

KvSequence& KvSequence::operator=(KvSequence&& o) noexcept {
  if (this != &o) {
    Release();
    mgr_ = std::exchange(o.mgr_, nullptr);
    tables_ = std::move(o.tables_);
    released_ = std::move(o.released_);
    hashes_ = std::move(o.hashes_);
    num_slots_ = std::exchange(o.num_slots_, 0);
    o.tables_.clear();
    o.released_.clear();
    o.hashes_.clear();
  }
  return *this;
}

const std::vector<BlockId>& KvSequence::blocks(int32_t group) const {
  static const std::vector<BlockId> kNone;
  return tables_.empty() ? kNone : tables_[static_cast<size_t>(group)];
}

void KvSequence::Release() {
  if (mgr_) mgr_->Free(*this);
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config),
      windows_(config.group_windows.empty() ? std::vector<int32_t>{0} : config.group_windows),
      pool_(config.num_blocks) {
  FERRY_CHECK(config.block_size > 0);
  for (int32_t w : windows_) FERRY_CHECK(w >= 0);
}

double KvCacheManager::Usage() const {
  if (num_blocks() == 0) return 0.0;
  return 1.0 - static_cast<double>(pool_.NumFree()) / num_blocks();
}

BlockHash KvCacheManager::GroupHash(BlockHash h, int32_t group) {
  return group == 0 ? h : Mix64(h + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(group));
}

int32_t KvCacheManager::FirstWindowBlock(int32_t group, int64_t pos) const {
  const int32_t w = windows_[static_cast<size_t>(group)];
  if (w == 0) return 0;
  return static_cast<int32_t>(std::max<int64_t>(0, pos - w + 1) / config_.block_size);
}

int64_t KvCacheManager::SequenceBlocks(int64_t num_tokens, int32_t pass_tokens) const {
  const int64_t bs = config_.block_size;
  int64_t n = 0;
  for (int32_t w : windows_) {
    // A sliding group holds the window of a pass's first query through its last query:
    // w + pass_tokens - 1 consecutive positions, which touch at most this many blocks.
    const int64_t span = w + int64_t{std::max(pass_tokens, 1)} - 1;
    n += w == 0 ? BlocksFor(num_tokens)
                : std::min<int64_t>(BlocksFor(num_tokens), (span - 1 + bs - 1) / bs + 1);
  }
  return n;
}

namespace {

// The chain of full-block hashes of tokens, block by block (never the block of the last token:
// its logits must be computed).
std::vector<BlockHash> HashChain(std::span<const int32_t> tokens, size_t bs) {
  std::vector<BlockHash> chain;
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / bs;
  BlockHash parent = kRootBlockHash;
  for (size_t i = 0; i < max_blocks; ++i)
    chain.push_back(parent = HashBlock(parent, tokens.subspan(i * bs, bs)));
  return chain;
}

}  // namespace

PrefixHit KvCacheManager::FindCachedPrefix(std::span<const int32_t> tokens) const {
  return LookUpPrefix(tokens, /*use_tiers=*/false);
}

PrefixHit KvCacheManager::FindPrefix(std::span<const int32_t> tokens) {
  return LookUpPrefix(tokens, tiers_ != nullptr);
}

PrefixHit KvCacheManager::LookUpPrefix(std::span<const int32_t> tokens, bool use_tiers) const {
  PrefixHit hit;
  if (!config_.prefix_caching) return hit;
  const int32_t bs = config_.block_size;
  const std::vector<BlockHash> chain = HashChain(tokens, static_cast<size_t>(bs));
  // Group g's block i: in the pool, else (use_tiers) in RAM or on disk. A tier is asked once per
  // block (a fetch pins the bytes and refreshes its LRU place); a block of another size (e.g.
  // stored before the INT8 key copy was enabled) is a miss.
  std::map<std::pair<int32_t, size_t>, std::optional<TieredBlockStore::Fetched>> fetched;
  auto tier_block = [&](int32_t g, size_t i) -> std::optional<TieredBlockStore::Fetched>& {
    auto [it, fresh] = fetched.try_emplace({g, i});
    if (fresh) {
      auto f = tiers_->Fetch(GroupHash(chain[i], g));
      if (f && f->bytes->size() == content_->BlockBytes()) it->second = std::move(f);
    }
    return it->second;
  };
  auto held = [&](int32_t g, size_t i) {
    return pool_.Find(GroupHash(chain[i], g)).has_value() || (use_tiers && tier_block(g, i).has_value());
  };
  // Full groups: the longest chain every one of them holds from the start.
  size_t k = chain.size();
  for (int32_t g = 0; g < num_groups(); ++g)
    for (size_t i = 0; i < k && group_window(g) == 0; ++i)
      if (!held(g, i)) k = i;
  // Sliding groups: the longest of those whose end's window each of them holds.
  auto window_held = [&](size_t blocks) {
    for (int32_t g = 0; g < num_groups(); ++g) {
      if (group_window(g) == 0) continue;
      for (size_t i = static_cast<size_t>(FirstWindowBlock(g, static_cast<int64_t>(blocks) * bs)); i < blocks;
           ++i)
        if (!held(g, i)) return false;
    }
    return true;
  };
  while (k > 0 && !window_held(k)) --k;
  if (k == 0) return hit;
  hit.tables.resize(static_cast<size_t>(num_groups()));
  for (int32_t g = 0; g < num_groups(); ++g) {
    const size_t first = static_cast<size_t>(FirstWindowBlock(g, static_cast<int64_t>(k) * bs));
    std::vector<BlockId>& table = hit.tables[static_cast<size_t>(g)];
    for (size_t i = 0; i < k; ++i) {
      if (i < first) {
        table.push_back(kReleasedBlock);
      } else if (auto id = pool_.Find(GroupHash(chain[i], g))) {
        table.push_back(*id);
      } else {  // held, so a tier has it
        std::optional<TieredBlockStore::Fetched>& f = tier_block(g, i);
        hit.restores.push_back({i, g, std::move(f->bytes), f->tier});
        table.push_back(kTierBlock);
      }
    }
  }
  hit.hashes.assign(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(k));
  hit.num_tokens = static_cast<int32_t>(k) * bs;
  return hit;
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
  if (Status st = content_->Read(id, bytes->data()); !st.ok()) {  // a rank unreachable: keep nothing
    Log(LogLevel::kWarn, "prefix cache: an evicted block was not kept in a tier: {}", st.ToString());
    return;
  }
  tiers_->Offload({hash, depth, std::move(bytes)});
}

std::optional<SlotAllocation> KvCacheManager::AllocateSlots(KvSequence& seq, int32_t num_slots,
                                                            const PrefixHit* hit) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  const size_t groups = static_cast<size_t>(num_groups());
  const bool take_hit = hit && !hit->empty() && seq.empty();
  FERRY_CHECK(!take_hit || hit->tables.size() == groups);
  const int32_t need = BlocksFor(num_slots);
  const int32_t bs = config_.block_size;
  if (seq.tables_.empty()) {
    seq.tables_.resize(groups);
    seq.released_.assign(groups, 0);
  }
  // Appending into a partial last block that another sequence shares needs a private copy; so
  // does one registered in the prefix cache (a full block made partial by Truncate). A partial
  // last block holds the next position, so it is inside every window.
  std::vector<uint8_t> cow(groups, 0);  // [groups]
  int32_t fresh = 0;
  for (size_t g = 0; g < groups; ++g) {
    const std::vector<BlockId>& t = seq.tables_[g];
    const int32_t have = static_cast<int32_t>(take_hit ? hit->tables[g].size() : t.size());
    if (num_slots > seq.num_slots_ && seq.num_slots_ % bs != 0) {
      FERRY_CHECK(t.back() >= 0);
      cow[g] = pool_.RefCount(t.back()) > 1 || pool_.IsCached(t.back());
    }
    fresh += std::max(0, need - have) + cow[g];
  }
  int32_t revived = 0;  // hit blocks that are free now (they count against NumFree)
  if (take_hit) {
    for (const std::vector<BlockId>& t : hit->tables)
      for (BlockId b : t) revived += b >= 0 && pool_.RefCount(b) == 0 ? 1 : 0;
    fresh += static_cast<int32_t>(hit->restores.size());
  }
  if (fresh + revived > pool_.NumFree()) return std::nullopt;

  seq.mgr_ = this;
  SlotAllocation out;
  if (take_hit) {
    for (const std::vector<BlockId>& t : hit->tables)
      for (BlockId b : t)
        if (b >= 0) pool_.Ref(b);  // before Allocate, so they are not evicted
    seq.tables_ = hit->tables;
    for (size_t g = 0; g < groups; ++g)
      seq.released_[g] =
          static_cast<int32_t>(std::count(seq.tables_[g].begin(), seq.tables_[g].end(), kReleasedBlock));
    seq.hashes_ = hit->hashes;
    seq.num_slots_ = hit->num_tokens;
    for (const TierRestore& r : hit->restores) {  // copy back: no recompute
      BlockId& entry = seq.tables_[static_cast<size_t>(r.group)][r.index];
      FERRY_CHECK(tiers_ && entry == kTierBlock && r.bytes->size() == content_->BlockBytes());
      BlockId dst = *pool_.Allocate();
      // A failed write means a rank is unreachable; its next step fails the engine before this
      // block is read.
      if (Status st = content_->Write(dst, r.bytes->data()); !st.ok())
        Log(LogLevel::kError, "prefix cache: restoring a block failed: {}", st.ToString());
      pool_.MarkCached(dst, GroupHash(hit->hashes[r.index], r.group), static_cast<int32_t>(r.index));
      entry = dst;
      ++restored_[static_cast<size_t>(r.tier)];
    }
  }
  for (size_t g = 0; g < groups; ++g) {
    std::vector<BlockId>& t = seq.tables_[g];
    if (cow[g]) {
      BlockId dst = *pool_.Allocate();
      out.copies.push_back({t.back(), dst});
      pool_.Unref(t.back());
      t.back() = dst;
    }
    while (static_cast<int32_t>(t.size()) < need) {
      t.push_back(*pool_.Allocate());
      ++out.new_blocks;
    }
  }
  seq.num_slots_ = std::max(seq.num_slots_, num_slots);
  return out;
}

void KvCacheManager::CacheFullBlocks(KvSequence& seq, std::span<const int32_t> tokens, int32_t num_computed) {
  if (!config_.prefix_caching || seq.tables_.empty()) return;
  const size_t bs = static_cast<size_t>(config_.block_size);
  const size_t full = std::min(static_cast<size_t>(num_computed) / bs, seq.tables_[0].size());
  FERRY_CHECK(static_cast<size_t>(num_computed) <= tokens.size());
  for (size_t i = seq.hashes_.size(); i < full; ++i) {
    BlockHash parent = i == 0 ? kRootBlockHash : seq.hashes_[i - 1];
    BlockHash h = HashBlock(parent, tokens.subspan(i * bs, bs));
    seq.hashes_.push_back(h);
    for (size_t g = 0; g < seq.tables_.size(); ++g)
      if (const BlockId b = seq.tables_[g][i]; b >= 0)
        pool_.MarkCached(b, GroupHash(h, static_cast<int32_t>(g)), static_cast<int32_t>(i));
  }
}

int32_t KvCacheManager::ReleaseOutOfWindow(KvSequence& seq, int32_t next_pos) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  int32_t released = 0;
  for (size_t g = 0; g < seq.tables_.size(); ++g) {
    std::vector<BlockId>& t = seq.tables_[g];
    const size_t first =
        std::min(t.size(), static_cast<size_t>(FirstWindowBlock(static_cast<int32_t>(g), next_pos)));
    for (size_t i = static_cast<size_t>(seq.released_[g]); i < first; ++i) {
      if (t[i] < 0) continue;
      pool_.Unref(t[i]);
      t[i] = kReleasedBlock;
      ++released;
    }
    seq.released_[g] = std::max(seq.released_[g], static_cast<int32_t>(first));
  }
  return released;
}

KvSequence KvCacheManager::Fork(const KvSequence& parent) {
  KvSequence child;
  child.mgr_ = this;
  child.tables_ = parent.tables_;
  child.released_ = parent.released_;
  child.hashes_ = parent.hashes_;
  child.num_slots_ = parent.num_slots_;
  for (const std::vector<BlockId>& t : child.tables_)
    for (BlockId b : t)
      if (b >= 0) pool_.Ref(b);
  return child;
}

void KvCacheManager::Free(KvSequence& seq) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  for (const std::vector<BlockId>& t : seq.tables_)
    for (auto it = t.rbegin(); it != t.rend(); ++it)
      if (*it >= 0) pool_.Unref(*it);
  seq.tables_.clear();
  seq.released_.clear();
  seq.hashes_.clear();
  seq.num_slots_ = 0;
  seq.mgr_ = nullptr;
}

void KvCacheManager::Truncate(KvSequence& seq, int32_t num_slots) {
  FERRY_CHECK(seq.mgr_ == nullptr || seq.mgr_ == this);
  FERRY_CHECK(num_slots >= 0 && num_slots <= seq.num_slots_);
  const size_t keep = static_cast<size_t>(BlocksFor(num_slots));
  for (size_t g = 0; g < seq.tables_.size(); ++g) {
    std::vector<BlockId>& t = seq.tables_[g];
    while (t.size() > keep) {
      if (t.back() >= 0) pool_.Unref(t.back());
      t.pop_back();
    }
    seq.released_[g] = std::min(seq.released_[g], static_cast<int32_t>(keep));
  }
  const size_t full = static_cast<size_t>(num_slots / config_.block_size);
  if (seq.hashes_.size() > full) seq.hashes_.resize(full);
  seq.num_slots_ = num_slots;
  if (keep == 0) {
    seq.tables_.clear();
    seq.released_.clear();
    seq.mgr_ = nullptr;
  }
}

}  // namespace ferry::kv
