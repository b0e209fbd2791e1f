#include "model/kv_cache.h"

#include <numeric>

#include "base/check.h"

namespace ferry {

void KvCache::StoreKey(int32_t layer, int32_t seq, int32_t slot, const float* k) {
  KvStorage& s = storage();
  const size_t i = SlotIndex(layer, seq, slot);
  for (int32_t h = 0; h < s.n_kv_heads(); ++h) s.StoreKey(i, h, k + int64_t{h} * s.head_dim());
}
void KvCache::StoreValue(int32_t layer, int32_t seq, int32_t slot, const float* v) {
  KvStorage& s = storage();
  const size_t i = SlotIndex(layer, seq, slot);
  for (int32_t h = 0; h < s.n_kv_heads(); ++h) s.StoreValue(i, h, v + int64_t{h} * s.head_dim());
}
void KvCache::StoreKeyHead(int32_t layer, int32_t seq, int32_t slot, int32_t head, const float* k) {
  storage().StoreKey(SlotIndex(layer, seq, slot), head, k);
}
void KvCache::StoreValueHead(int32_t layer, int32_t seq, int32_t slot, int32_t head, const float* v) {
  storage().StoreValue(SlotIndex(layer, seq, slot), head, v);
}
void KvCache::LoadKey(int32_t layer, int32_t seq, int32_t slot, float* k) const {
  storage().LoadKey(SlotIndex(layer, seq, slot), k);
}
void KvCache::LoadValue(int32_t layer, int32_t seq, int32_t slot, float* v) const {
  storage().LoadValue(SlotIndex(layer, seq, slot), v);
}
const uint8_t* KvCache::KeyBytes(int32_t layer, int32_t seq, int32_t slot) const {
  return storage().KeyBytes(SlotIndex(layer, seq, slot));
}
const uint8_t* KvCache::ValueBytes(int32_t layer, int32_t seq, int32_t slot) const {
  return storage().ValueBytes(SlotIndex(layer, seq, slot));
}

StatusOr<ContiguousKvCache> ContiguousKvCache::Create(int32_t n_layers, int32_t n_seqs, int32_t max_seq_len,
                                                      int32_t n_kv_heads, int32_t head_dim,
                                                      const KvCacheTypes& types) {
  if (n_layers <= 0 || n_seqs <= 0 || max_seq_len <= 0 || n_kv_heads <= 0 || head_dim <= 0)
    return InvalidArgumentError("KV cache dimensions must be positive");
  ContiguousKvCache c;
  c.n_layers_ = n_layers;
  c.n_seqs_ = n_seqs;
  c.max_seq_len_ = max_seq_len;
  FERRY_RETURN_IF_ERROR(c.kv_.Allocate(static_cast<size_t>(n_layers) * n_seqs * max_seq_len, n_kv_heads,
                                       head_dim, types, "a KV cache", "--ctx"));
  c.block_table_.resize(static_cast<size_t>(n_seqs));
  std::iota(c.block_table_.begin(), c.block_table_.end(), 0);
  return c;
}

size_t ContiguousKvCache::SlotIndex(int32_t layer, int32_t seq, int32_t pos) const {
  FERRY_DCHECK(layer >= 0 && layer < n_layers_ && seq >= 0 && seq < n_seqs_ && pos >= 0 &&
               pos < max_seq_len_);
  return (static_cast<size_t>(layer) * n_seqs_ + seq) * max_seq_len_ + pos;
}

kernels::KvBlocks ContiguousKvCache::View(int32_t layer, int32_t seq) const {
  // Blocks are the per-sequence regions of this layer; the table maps seq -> its region.
  kernels::KvBlocks view{nullptr, nullptr, block_table_.data() + seq, max_seq_len_};
  kv_.Attach(view, static_cast<size_t>(layer) * n_seqs_ * max_seq_len_);
  return view;
}

}  // namespace ferry
