// KvCache: where the model writes and reads keys/values. The attention kernels read K/V
// through block tables, so a paged cache (block pool + per-sequence tables) and the simple
// contiguous cache here implement the same interface.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "kernels/kernels.h"

namespace ferry {

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Capacity in tokens of one sequence.
  virtual int32_t MaxSeqLen() const = 0;
  virtual int32_t NumSeqs() const = 0;
  // Slot for token `pos` of sequence `seq` in `layer`: [n_kv_heads, head_dim] f32 each.
  virtual float* KeySlot(int32_t layer, int32_t seq, int32_t pos) = 0;
  virtual float* ValueSlot(int32_t layer, int32_t seq, int32_t pos) = 0;
  // Block-table view of one sequence in one layer for the attention kernel.
  virtual kernels::KvBlocks View(int32_t layer, int32_t seq) const = 0;
};

// One block of max_seq_len tokens per sequence slot (block table = {seq}).
class ContiguousKvCache final : public KvCache {
 public:
  // Fails with kResourceExhausted if the allocation is too large.
  static StatusOr<ContiguousKvCache> Create(int32_t n_layers, int32_t n_seqs, int32_t max_seq_len,
                                            int32_t n_kv_heads, int32_t head_dim);

  int32_t MaxSeqLen() const override { return max_seq_len_; }
  int32_t NumSeqs() const override { return n_seqs_; }
  float* KeySlot(int32_t layer, int32_t seq, int32_t pos) override;
  float* ValueSlot(int32_t layer, int32_t seq, int32_t pos) override;
  kernels::KvBlocks View(int32_t layer, int32_t seq) const override;
  size_t Bytes() const { return k_.size() + v_.size(); }

 private:
  size_t Offset(int32_t layer, int32_t seq, int32_t pos) const;

  int32_t n_layers_ = 0, n_seqs_ = 0, max_seq_len_ = 0, row_ = 0;  // row_ = n_kv_heads * head_dim
  AlignedBuffer k_, v_;               // [n_layers, n_seqs, max_seq_len, n_kv_heads, head_dim]
  std::vector<int32_t> block_table_;  // [n_seqs]: block_table_[s] = s
};

}  // namespace ferry
