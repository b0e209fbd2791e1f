// PagedKvCache: K/V tensors in fixed-size physical blocks shared by all sequences (vLLM's
// PagedAttention layout). Which blocks a batch slot reads and writes is set per step from
// the block manager's tables (kv/KvCacheManager); attention reads through those tables.
// The layers form KV groups (model/kv_group_layout.h): each group has its own table per batch
// slot, and a physical block holds block_size tokens of one group's layers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/kv_cache.h"
#include "model/kv_group_layout.h"

namespace ferry {

class PagedKvCache final : public KvCache {
 public:
  // Bytes of K plus V for one block of n_layers layers (KvGroupLayout::layers_per_group), in
  // the given types.
  static size_t BlockBytes(int32_t n_layers, int32_t block_size, int32_t n_kv_heads, int32_t head_dim,
                           const KvCacheTypes& types = {});
  // n_slots: sequences one step can hold; max_seq_len: positions one sequence may reach;
  // groups: the layers' KV groups (empty: KvGroupLayout::Single). Fails with
  // kResourceExhausted if the allocation is too large.
  static StatusOr<PagedKvCache> Create(int32_t n_layers, int32_t num_blocks, int32_t block_size,
                                       int32_t n_kv_heads, int32_t head_dim, int32_t n_slots,
                                       int32_t max_seq_len, const KvCacheTypes& types = {},
                                       KvGroupLayout groups = {});

  int32_t MaxSeqLen() const override { return max_seq_len_; }
  int32_t NumSeqs() const override { return static_cast<int32_t>(slot_shift_.size()); }
  kernels::KvBlocks View(int32_t layer, int32_t seq) const override;
  int32_t Slot(int32_t seq, int32_t pos) const override {
    return pos + slot_shift_[static_cast<size_t>(seq)];
  }
  float* AttentionWeightSums(int32_t layer, int32_t seq) override {
    return weight_sums_[static_cast<size_t>(seq)];
  }

  // Batch slot `slot` reads/writes the layers of KV group `group` through `blocks` (logical
  // block i -> physical block) until the next call. Positions beyond blocks.size() * block_size
  // are invalid for it, and so are those of a negative entry (a sliding group's block that
  // has left the window: attention never reads it, and writing it is a bug).
  void SetBlockTable(int32_t slot, std::span<const int32_t> blocks, int32_t group = 0);
  // A budgeted sequence (model/kv_budget_policy.h) keeps its tokens densely: token `pos` of
  // batch slot `slot` is stored in cache slot pos + shift (shift <= 0), and H2O adds the
  // attention weight each stored key receives into weight_sums ([stored slots], null: none).
  // Reset to (0, null) by SetBlockTable.
  void SetKeptLayout(int32_t slot, int32_t shift, float* weight_sums);
  // Copies the K/V rows of cache slot `from` to `to` through batch slot `slot`'s table, in every
  // layer (compaction after an eviction).
  void MoveRow(int32_t slot, int32_t from, int32_t to);
  // Copies block src to dst in every layer it holds (copy-on-write).
  void CopyBlock(int32_t src, int32_t dst);
  // The stored bytes of one block in every layer it holds ([layers_per_group] of
  // KvStorage::Export's layout),
  // for the prefix cache's RAM and disk tiers; WriteBlock puts such bytes back bit for bit.
  size_t BlockContentBytes() const;
  void ReadBlock(int32_t block, uint8_t* out) const;
  void WriteBlock(int32_t block, const uint8_t* in);

  // Progressive attention's INT8 key copy (KvCache::EnableInt8Keys), in the same block layout
  // as K, so prefix-shared, copied-on-write and compacted blocks carry it along. Allocated on
  // first use beside --kv-cache-memory: head_dim + 4 bytes per key head row.
  Status EnableInt8Keys() override { return kv_.EnableInt8Keys("--kv-cache-memory"); }

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  const KvGroupLayout& groups() const { return groups_; }

 protected:
  KvStorage& storage() override { return kv_; }
  const KvStorage& storage() const override { return kv_; }
  size_t SlotIndex(int32_t layer, int32_t seq, int32_t pos) const override;

 private:
  // Where layer `layer`'s rows of physical block 0 start, in token slots.
  size_t LayerBase(int32_t layer) const {
    return static_cast<size_t>(groups_.layer_index[static_cast<size_t>(layer)]) * num_blocks_ * block_size_;
  }

  int32_t n_layers_ = 0, num_blocks_ = 0, block_size_ = 0, max_seq_len_ = 0;
  KvGroupLayout groups_;
  KvStorage kv_;  // [layers_per_group, num_blocks, block_size] token slots
  std::vector<std::vector<std::vector<int32_t>>> tables_;  // [groups][n_slots][blocks of that slot]
  std::vector<int32_t> slot_shift_;           // [n_slots] cache slot - position
  std::vector<float*> weight_sums_;           // [n_slots] H2O score accumulators or null
};

}  // namespace ferry
