// KvCacheManager: per-sequence block tables over a BlockPool — on-demand allocation,
// prefix-cache lookup, fork with copy-on-write, and RAII leases (KvSequence) that always
// return their blocks. Pure bookkeeping: the tensors live in model/PagedKvCache.
// A sequence has one table per KV group (model/kv_group_layout.h), all drawing on the one pool;
// a sliding-window group's sequence gives its blocks back as they leave the window.
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
  // [groups] each KV group's sliding window in positions (0: full attention); empty: one
  // full-attention group.
  std::vector<int32_t> group_windows = {};
};

// A table entry of a sliding group's block that has left the window: given back to the pool,
// never read again by the sequence (attention skips keys before the window).
inline constexpr BlockId kReleasedBlock = -2;

class KvCacheManager;

// One sequence's lease on KV blocks: its block table per KV group (logical block i -> physical
// block, or kReleasedBlock) and how many token slots it reserves. Move-only; destroying it
// returns every block.
class KvSequence {
 public:
  KvSequence() = default;
  ~KvSequence() { Release(); }
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;
  KvSequence(KvSequence&& o) noexcept { *this = std::move(o); }
  KvSequence& operator=(KvSequence&& o) noexcept;

  // Group `group`'s table (group 0: the only one of a model without sliding layers).
  const std::vector<BlockId>& blocks(int32_t group = 0) const;
  int32_t num_groups() const { return static_cast<int32_t>(tables_.size()); }
  int32_t num_slots() const { return num_slots_; }  // token positions reserved
  bool empty() const { return tables_.empty() || tables_[0].empty(); }
  // Returns every block to the pool (idempotent).
  void Release();

 private:
  friend class KvCacheManager;
  KvCacheManager* mgr_ = nullptr;
  std::vector<std::vector<BlockId>> tables_;  // [groups][ceil(num_slots / block_size)]
  std::vector<int32_t> released_;             // [groups] leading entries released (kReleasedBlock)
  std::vector<BlockHash> hashes_;  // token-chain hashes of the leading full blocks registered so far
  int32_t num_slots_ = 0;
};

// Marks a block of a PrefixHit that a tier holds: AllocateSlots gives it a pool block.
inline constexpr BlockId kTierBlock = -1;

// A block of a PrefixHit found in the RAM or disk tier, pinned (bytes) until it is restored.
struct TierRestore {
  size_t index;   // the block's place in its group's table
  int32_t group;  // its KV group
  BlockBytes bytes;
  BlockTier tier;
};

// Cached full blocks covering a prefix of a token sequence, per KV group: pool blocks,
// kReleasedBlock for a sliding group's blocks before the window of the prefix's end (never
// read), and (FindPrefix) kTierBlock entries whose bytes a tier holds.
struct PrefixHit {
  std::vector<std::vector<BlockId>> tables;  // [groups][num_tokens / block_size]; empty: no hit
  std::vector<BlockHash> hashes;             // the token chain's hashes of those blocks
  std::vector<TierRestore> restores;         // one per kTierBlock entry, by group, then in order
  int32_t num_tokens = 0;                    // hashes.size() * block_size
  bool empty() const { return num_tokens == 0; }
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
  // Blocks of one group's table that cover num_tokens positions.
  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + config_.block_size - 1) / config_.block_size);
  }
  const BlockPool& pool() const { return pool_; }
  int32_t num_groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t group_window(int32_t group) const { return windows_[static_cast<size_t>(group)]; }
  // The most pool blocks one sequence of num_tokens positions holds at once, over all groups,
  // when each pass computes at most pass_tokens of them: a full group's table covers every
  // position, a sliding group's the window of the pass's first query through its last.
  int64_t SequenceBlocks(int64_t num_tokens, int32_t pass_tokens) const;

  // Longest prefix of `tokens` held in cached full blocks, capped below tokens.size() so at
  // least one token is always computed (its logits are needed). Empty without prefix caching.
  // A prefix of k blocks is held when every full group caches all k and every sliding group
  // the ones holding a position inside the window of position k * block_size (the first one
  // computed after the hit); a sliding group's earlier blocks are neither needed nor taken.
  PrefixHit FindCachedPrefix(std::span<const int32_t> tokens) const;
  // The same over the pool and then the tiers (AttachTiers): a block the pool misses may be
  // found in RAM or on disk, and the chain goes on after it. Without tiers: FindCachedPrefix.
  PrefixHit FindPrefix(std::span<const int32_t> tokens);

  // Evicted cached blocks are copied (through `content`) into `store`, and AllocateSlots
  // copies a PrefixHit's tier blocks back into fresh pool blocks. Both must outlive this.
  // A tier holds physical blocks (one KV group's layers) under the pool's per-group hashes.
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

  // Gives back the blocks of seq's sliding groups whose every position is before the window
  // of position next_pos (the first one its next pass computes; later queries have later
  // windows, so the sequence never reads them again). Cached blocks stay reusable in the pool
  // until evicted. Returns how many blocks were released.
  int32_t ReleaseOutOfWindow(KvSequence& seq, int32_t next_pos);
  // The first logical block a query at position `pos` reads in group `group`.
  int32_t FirstWindowBlock(int32_t group, int64_t pos) const;

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
  // FindCachedPrefix, and with use_tiers also over the tiers (FindPrefix).
  PrefixHit LookUpPrefix(std::span<const int32_t> tokens, bool use_tiers) const;

  // The pool's hash for group g's block whose token chain hashes to h (group 0: h itself).
  static BlockHash GroupHash(BlockHash h, int32_t group);

  KvCacheConfig config_;
  std::vector<int32_t> windows_;  // [groups] config_.group_windows, or {0}
  BlockPool pool_;
  TieredBlockStore* tiers_ = nullptr;
  BlockContent* content_ = nullptr;
  int64_t restored_[2] = {0, 0};  // [BlockTier]
};

}  // namespace ferry::kv
