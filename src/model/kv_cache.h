// KvCache: where the model writes and reads keys/values. The attention kernels read K/V
// through block tables, so a paged cache (block pool + per-sequence tables) and the simple
// contiguous cache here implement the same interface.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_storage.h"

namespace ferry {

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Capacity in tokens of one sequence.
  virtual int32_t MaxSeqLen() const = 0;
  virtual int32_t NumSeqs() const = 0;
  // Writes the K / V rows ([n_kv_heads, head_dim] f32) of slot `slot` (= the token's position
  // unless Slot() below says otherwise) of sequence `seq` in `layer`, rounded to the cache's
  // types (kv_storage.h) per head.
  void StoreKey(int32_t layer, int32_t seq, int32_t slot, const float* k);
  void StoreValue(int32_t layer, int32_t seq, int32_t slot, const float* v);
  // Only KV head `head`'s row (head_dim floats): layers with pruned heads.
  void StoreKeyHead(int32_t layer, int32_t seq, int32_t slot, int32_t head, const float* k);
  void StoreValueHead(int32_t layer, int32_t seq, int32_t slot, int32_t head, const float* v);
  // The stored rows as floats ([n_kv_heads, head_dim]) and as bytes (key_slot_bytes() long).
  void LoadKey(int32_t layer, int32_t seq, int32_t slot, float* k) const;
  void LoadValue(int32_t layer, int32_t seq, int32_t slot, float* v) const;
  const uint8_t* KeyBytes(int32_t layer, int32_t seq, int32_t slot) const;
  const uint8_t* ValueBytes(int32_t layer, int32_t seq, int32_t slot) const;
  size_t KeySlotBytes() const { return storage().key_slot_bytes(); }
  size_t ValueSlotBytes() const { return storage().value_slot_bytes(); }
  const KvCacheTypes& types() const { return storage().types(); }
  size_t Bytes() const { return storage().Bytes(); }
  // Block-table view of one sequence in one layer for the attention kernel.
  virtual kernels::KvBlocks View(int32_t layer, int32_t seq) const = 0;

  // Hooks for caches that keep only part of a sequence (model/kv_budget_cache.h): they store
  // the kept tokens densely in slots 0..n-1 and evict between forward passes. The defaults
  // describe a cache that stores position p in slot p.
  // Before any write of `batch`: makes room for its tokens (errors name the limit).
  virtual Status BeginForward(const ForwardBatch& batch) { return Status::Ok(); }
  // The slot of token `pos` of `seq`: where its K/V go and the index attention sees.
  virtual int32_t Slot(int32_t seq, int32_t pos) const { return pos; }
  // Per-slot sums of the attention weights `seq`'s keys receive (summed over layers), or null
  // when the cache does not use them.
  virtual float* AttentionWeightSums(int32_t layer, int32_t seq) { return nullptr; }
  // After the forward pass of `batch`: commits its tokens and applies any eviction policy.
  virtual void EndForward(const ForwardBatch& batch) {}

  // Progressive attention (model/attention_sparsity.h): an INT8 copy of every key beside the
  // stored one, exposed by View() as KvBlocks::k_i8 / k_i8_scale. EnableInt8Keys allocates it
  // (zeroed: call it before the first key is written); a cache that keeps none says so.
  virtual Status EnableInt8Keys() {
    return UnsupportedError(
        "--attn-progressive needs a KV cache with an INT8 key copy: the contiguous one of ferry run, ppl "
        "and bench, or the batching engine's paged one (not the --kv-policy sink|h2o cache of "
        "run/ppl/bench)");
  }
  // A slot's INT8 key rows [n_kv_heads, head_dim] and their scales [n_kv_heads]; null unless enabled.
  int8_t* KeySlotInt8(int32_t layer, int32_t seq, int32_t slot) {
    return storage().KeyInt8(SlotIndex(layer, seq, slot));
  }
  float* KeyScaleSlot(int32_t layer, int32_t seq, int32_t slot) {
    return storage().KeyScale(SlotIndex(layer, seq, slot));
  }

 protected:
  // The bytes, and where slot `slot` of `seq` in `layer` lives in them.
  virtual KvStorage& storage() = 0;
  virtual const KvStorage& storage() const = 0;
  virtual size_t SlotIndex(int32_t layer, int32_t seq, int32_t slot) const = 0;
};

// One block of max_seq_len tokens per sequence slot (block table = {seq}).
class ContiguousKvCache final : public KvCache {
 public:
  // Fails with kResourceExhausted if the allocation is too large.
  static StatusOr<ContiguousKvCache> Create(int32_t n_layers, int32_t n_seqs, int32_t max_seq_len,
                                            int32_t n_kv_heads, int32_t head_dim,
                                            const KvCacheTypes& types = {});

  int32_t MaxSeqLen() const override { return max_seq_len_; }
  int32_t NumSeqs() const override { return n_seqs_; }
  kernels::KvBlocks View(int32_t layer, int32_t seq) const override;
  Status EnableInt8Keys() override { return kv_.EnableInt8Keys("--ctx"); }

 protected:
  KvStorage& storage() override { return kv_; }
  const KvStorage& storage() const override { return kv_; }
  size_t SlotIndex(int32_t layer, int32_t seq, int32_t pos) const override;

 private:
  int32_t n_layers_ = 0, n_seqs_ = 0, max_seq_len_ = 0;
  KvStorage kv_;                      // [n_layers, n_seqs, max_seq_len] token slots
  std::vector<int32_t> block_table_;  // [n_seqs]: block_table_[s] = s
};

}  // namespace ferry
