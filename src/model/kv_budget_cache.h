// BudgetKvCache: a paged KV cache that keeps at most `budget` tokens per sequence between
// forward passes (StreamingLLM sinks + recent window, or H2O heavy hitters + recent window),
// so long generations run in bounded memory. Kept tokens live densely in slots 0..n-1 of the
// sequence's blocks; after each forward pass the evicted slots are filled by moving the last
// kept tokens into them and emptied blocks go back to the free list. Keys keep the RoPE of
// their original positions, so attention over the kept set is plain attention over fewer keys.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "model/kv_budget_policy.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/sparsity_options.h"

namespace ferry {

class BudgetKvCache final : public KvCache {
 public:
  // max_seq_len: positions a sequence may reach; max_batch: tokens one forward pass may append
  // to one sequence (memory = budget + max_batch tokens per sequence). `stats` (may be null)
  // receives evictions and peak memory.
  static StatusOr<std::unique_ptr<BudgetKvCache>> Create(int32_t n_layers, int32_t n_seqs,
                                                         int32_t max_seq_len, int32_t max_batch,
                                                         int32_t n_kv_heads, int32_t head_dim,
                                                         const KvBudgetConfig& config, SparsityStats* stats,
                                                         const KvCacheTypes& types = {});

  int32_t MaxSeqLen() const override { return max_seq_len_; }
  int32_t NumSeqs() const override { return static_cast<int32_t>(seqs_.size()); }
  kernels::KvBlocks View(int32_t layer, int32_t seq) const override;
  Status BeginForward(const ForwardBatch& batch) override;
  int32_t Slot(int32_t seq, int32_t pos) const override;
  float* AttentionWeightSums(int32_t layer, int32_t seq) override;
  void EndForward(const ForwardBatch& batch) override;

  // Accounting: every block is either free or in exactly one sequence's table.
  int32_t num_blocks() const { return num_blocks_; }
  int32_t NumFreeBlocks() const { return static_cast<int32_t>(free_.size()); }
  int32_t NumBlocksOf(int32_t seq) const {
    return static_cast<int32_t>(seqs_[static_cast<size_t>(seq)].table.size());
  }
  const std::vector<int32_t>& BlockTableOf(int32_t seq) const {
    return seqs_[static_cast<size_t>(seq)].table;
  }
  int32_t StoredTokens(int32_t seq) const { return seqs_[static_cast<size_t>(seq)].kept.size(); }
  // Original positions of the kept tokens, by slot.
  const std::vector<int32_t>& StoredPositions(int32_t seq) const {
    return seqs_[static_cast<size_t>(seq)].kept.pos;
  }
  int64_t EvictedTokens() const { return evicted_; }
  size_t BlockBytes() const {
    return static_cast<size_t>(n_layers_) * block_size_ * (kv_.key_slot_bytes() + kv_.value_slot_bytes());
  }

 protected:
  KvStorage& storage() override { return kv_; }
  const KvStorage& storage() const override { return kv_; }
  size_t SlotIndex(int32_t layer, int32_t seq, int32_t slot) const override;  // a kept slot

 private:
  struct Seq {
    std::vector<int32_t> table;           // [blocks] physical block ids
    KeptTokens kept;                      // kept tokens, including those of the pass in flight
    int32_t next_pos = 0;                 // position of the next token to append
    int32_t new_slot0 = 0, new_pos0 = 0;  // the pass in flight: its first slot and position
  };
  size_t RowSlot(int32_t layer, const Seq& s, int32_t slot) const;  // any slot of s's blocks
  void Reset(int32_t seq);
  void ResizeBlocks(Seq& s, int32_t n_tokens);
  void Evict(int32_t seq);

  KvBudgetConfig config_;
  int32_t n_layers_ = 0, num_blocks_ = 0, block_size_ = 0, max_seq_len_ = 0, max_batch_ = 0;
  KvStorage kv_;               // [n_layers, num_blocks, block_size] token slots
  std::vector<Seq> seqs_;      // [n_seqs]
  std::vector<int32_t> free_;  // free physical blocks (LIFO)
  int64_t evicted_ = 0;
  SparsityStats* stats_ = nullptr;
};

// The KV cache a single-sequence-slot caller (ferry run / ppl / bench) should use for a model
// of config `c` run with `options`: a contiguous cache, or a BudgetKvCache reporting its
// evictions and memory into `stats` (when non-null; it must outlive the cache), storing K/V as
// `types`.
StatusOr<std::unique_ptr<KvCache>> CreateKvCacheFor(const ModelConfig& c, const SparsityOptions& options,
                                                    int32_t n_seqs, int32_t max_seq_len, int32_t max_batch,
                                                    SparsityStats* stats = nullptr,
                                                    const KvCacheTypes& types = {});

}  // namespace ferry
