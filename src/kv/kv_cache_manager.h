// KvCacheManager: per-sequence block tables over a BlockPool — on-demand allocation,
// prefix-cache lookup, fork with copy-on-write, and RAII leases (KvSequence) that always
// return their blocks. Pure bookkeeping: the tensors live in model/PagedKvCache.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/block_content.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/tiered_block_store.h"

namespace ferry::kv {

struct KvCacheConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per block
  bool prefix_caching = true;
};

class KvCacheManager;

// One sequence's lease on KV blocks: its block table (logical block i -> physical block) and
// how many token slots it reserves. Move-only; destroying it returns every block.
class KvSequence {
 public:
  KvSequence() = default;
  ~KvSequence() { Release(); }
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;
  KvSequence(KvSequence&& o) noexcept { *this = std::move(o); }
  KvSequence& operator=(KvSequence&& o) noexcept;

  const std::vector<BlockId>& blocks() const { return blocks_; }
  int32_t num_slots() const { return num_slots_; }  // token positions reserved
  bool empty() const { return blocks_.empty(); }
  // Returns every block to the pool (idempotent).
  void Release();

 private:
  friend class KvCacheManager;
  KvCacheManager* mgr_ = nullptr;
  std::vector<BlockId> blocks_;     // [ceil(num_slots / block_size)]
  std::vector<BlockHash> hashes_;   // hashes of the leading full blocks registered so far
  int32_t num_slots_ = 0;
};

// Marks a block of a PrefixHit that a tier holds: AllocateSlots gives it a pool block.
inline constexpr BlockId kTierBlock = -1;

// A block of a PrefixHit found in the RAM or disk tier, pinned (bytes) until it is restored.
struct TierRestore {
  size_t index;  // into PrefixHit::blocks
  BlockBytes bytes;
  BlockTier tier;
};

// Cached full blocks covering a prefix of a token sequence: pool blocks, and (FindPrefix)
// kTierBlock entries whose bytes a tier holds.
struct PrefixHit {
  std::vector<BlockId> blocks;
  std::vector<BlockHash> hashes;
  std::vector<TierRestore> restores;  // one per kTierBlock entry, in order
  int32_t num_tokens = 0;             // blocks.size() * block_size
};

// A block to copy before the step runs (copy-on-write of a shared partial block).
struct BlockCopy {
  BlockId src, dst;
};

struct SlotAllocation {
  int32_t new_blocks = 0;
  std::vector<BlockCopy> copies;
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  const KvCacheConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t NumFreeBlocks() const { return pool_.NumFree(); }
  // Fraction of blocks referenced by some sequence.
  double Usage() const;
  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + config_.block_size - 1) / config_.block_size);
  }
  const BlockPool& pool() const { return pool_; }

  // Longest prefix of `tokens` held in cached full blocks, capped below tokens.size() so at
  // least one token is always computed (its logits are needed). Empty without prefix caching.
  PrefixHit FindCachedPrefix(std::span<const int32_t> tokens) const;
  // The same over the pool and then the tiers (AttachTiers): a block the pool misses may be
  // found in RAM or on disk, and the chain goes on after it. Without tiers: FindCachedPrefix.
  PrefixHit FindPrefix(std::span<const int32_t> tokens);

  // Evicted cached blocks are copied (through `content`) into `store`, and AllocateSlots
  // copies a PrefixHit's tier blocks back into fresh pool blocks. Both must outlive this.
  void AttachTiers(TieredBlockStore* store, BlockContent* content);
  const TieredBlockStore* tiers() const { return tiers_; }
  // Blocks restored from each tier so far (restores actually made, not lookups).
  int64_t RestoredBlocks(BlockTier tier) const { return restored_[static_cast<size_t>(tier)]; }

  // Makes `seq` reserve slots for positions [0, num_slots): takes the `hit` blocks (first
  // allocation only; a tier block gets a fresh pool block its bytes are copied into, registered
  // in the prefix cache at once), allocates blocks on demand, and copies a shared partial last block
  // before it is appended to (copy-on-write). nullopt, with nothing changed, if the pool has
  // too few free blocks.
  std::optional<SlotAllocation> AllocateSlots(KvSequence& seq, int32_t num_slots, const PrefixHit* hit = nullptr);

  // Registers the full blocks of `seq` whose tokens are all computed (tokens[0, num_computed))
  // in the prefix cache.
  void CacheFullBlocks(KvSequence& seq, std::span<const int32_t> tokens, int32_t num_computed);

  // A new sequence sharing all of `parent`'s blocks (ref counts + 1), for parallel sampling.
  KvSequence Fork(const KvSequence& parent);

  // Returns seq's blocks (last block first, so a sequence's tail is evicted before its prefix).
  void Free(KvSequence& seq);

  // Shrinks `seq` to slots [0, num_slots) (<= num_slots()), e.g. to roll back rejected
  // speculative tokens: blocks past the end go back to the pool (a block other sequences share
  // only loses this reference) and prefix-cache hashes of blocks no longer full are dropped
  // from the sequence. A partial last block that is shared or prefix-cached is copied before
  // the next append into it (AllocateSlots' copy-on-write), so others never see the change.
  void Truncate(KvSequence& seq, int32_t num_slots);

 private:
  // Copies an evicted block into the tiers (the pool's eviction hook).
  void OnEvict(BlockId id, BlockHash hash, int32_t depth);

  KvCacheConfig config_;
  BlockPool pool_;
  TieredBlockStore* tiers_ = nullptr;
  BlockContent* content_ = nullptr;
  int64_t restored_[2] = {0, 0};  // [BlockTier]
};

}  // namespace ferry::kv
