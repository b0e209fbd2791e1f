#include "model/kv_cache.h"

#include <new>
#include <numeric>

#include "base/check.h"

namespace ferry {

StatusOr<ContiguousKvCache> ContiguousKvCache::Create(int32_t n_layers, int32_t n_seqs, int32_t max_seq_len,
                                                      int32_t n_kv_heads, int32_t head_dim) {
  if (n_layers <= 0 || n_seqs <= 0 || max_seq_len <= 0 || n_kv_heads <= 0 || head_dim <= 0)
    return InvalidArgumentError("KV cache dimensions must be positive");
  ContiguousKvCache c;
  c.n_layers_ = n_layers;
  c.n_seqs_ = n_seqs;
  c.max_seq_len_ = max_seq_len;
  c.row_ = n_kv_heads * head_dim;
  c.head_dim_ = head_dim;
  size_t bytes = static_cast<size_t>(n_layers) * n_seqs * max_seq_len * c.row_ * sizeof(float);
  try {
    c.k_ = AlignedBuffer(bytes);
    c.v_ = AlignedBuffer(bytes);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("cannot allocate a KV cache of 2 x {} MiB; lower --ctx", bytes >> 20);
  }
  c.block_table_.resize(static_cast<size_t>(n_seqs));
  std::iota(c.block_table_.begin(), c.block_table_.end(), 0);
  return c;
}

size_t ContiguousKvCache::Offset(int32_t layer, int32_t seq, int32_t pos) const {
  FERRY_DCHECK(layer >= 0 && layer < n_layers_ && seq >= 0 && seq < n_seqs_ && pos >= 0 &&
               pos < max_seq_len_);
  return ((static_cast<size_t>(layer) * n_seqs_ + seq) * max_seq_len_ + pos) * row_;
}

float* ContiguousKvCache::KeySlot(int32_t layer, int32_t seq, int32_t pos) {
  return k_.as<float>() + Offset(layer, seq, pos);
}
float* ContiguousKvCache::ValueSlot(int32_t layer, int32_t seq, int32_t pos) {
  return v_.as<float>() + Offset(layer, seq, pos);
}

kernels::KvBlocks ContiguousKvCache::View(int32_t layer, int32_t seq) const {
  // Blocks are the per-sequence regions of this layer; the table maps seq -> its region.
  size_t layer_off = static_cast<size_t>(layer) * n_seqs_ * max_seq_len_ * row_;
  kernels::KvBlocks view{k_.as<float>() + layer_off, v_.as<float>() + layer_off, block_table_.data() + seq,
                         max_seq_len_};
  k_i8_.Attach(view, layer_off);
  return view;
}

}  // namespace ferry
