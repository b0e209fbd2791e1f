#include "model/paged_kv_cache.h"

#include "base/check.h"

namespace ferry {

size_t PagedKvCache::BlockBytes(int32_t n_layers, int32_t block_size, int32_t n_kv_heads, int32_t head_dim,
                                const KvCacheTypes& types) {
  return static_cast<size_t>(n_layers) * block_size * KvStorage::SlotBytes(n_kv_heads, head_dim, types);
}

StatusOr<PagedKvCache> PagedKvCache::Create(int32_t n_layers, int32_t num_blocks, int32_t block_size,
                                            int32_t n_kv_heads, int32_t head_dim, int32_t n_slots,
                                            int32_t max_seq_len, const KvCacheTypes& types,
                                            KvGroupLayout groups) {
  if (n_layers <= 0 || num_blocks <= 0 || block_size <= 0 || n_kv_heads <= 0 || head_dim <= 0 ||
      n_slots <= 0 || max_seq_len <= 0)
    return InvalidArgumentError("paged KV cache dimensions must be positive");
  if (groups.windows.empty()) groups = KvGroupLayout::Single(n_layers);
  // Every layer in a group, every held one at its own place in its group's blocks (a pipeline
  // stage holds only its layers: KvGroupLayout::ForStage).
  bool valid = groups.num_layers() == n_layers && groups.layers_per_group > 0 &&
               static_cast<int32_t>(groups.layer_index.size()) == n_layers;
  std::vector<uint8_t> taken(valid ? static_cast<size_t>(groups.num_groups() * groups.layers_per_group) : 0);
  for (int32_t l = 0; valid && l < n_layers; ++l) {
    const int32_t g = groups.layer_group[static_cast<size_t>(l)],
                  j = groups.layer_index[static_cast<size_t>(l)];
    valid = g >= 0 && g < groups.num_groups() && j >= -1 && j < groups.layers_per_group;
    if (valid && j >= 0) valid = taken[static_cast<size_t>(g * groups.layers_per_group + j)]++ == 0;
  }
  if (!valid)
    return InvalidArgumentError("the KV groups ({} of {} layers) do not cover the model's {} layers",
                                groups.num_groups(), groups.layers_per_group, n_layers);
  PagedKvCache c;
  c.n_layers_ = n_layers;
  c.num_blocks_ = num_blocks;
  c.block_size_ = block_size;
  c.max_seq_len_ = max_seq_len;
  FERRY_RETURN_IF_ERROR(c.kv_.Allocate(static_cast<size_t>(groups.layers_per_group) * num_blocks * block_size,
                                       n_kv_heads, head_dim, types, "a paged KV cache", "--kv-cache-memory"));
  c.tables_.assign(static_cast<size_t>(groups.num_groups()),
                   std::vector<std::vector<int32_t>>(static_cast<size_t>(n_slots)));
  c.groups_ = std::move(groups);
  c.slot_shift_.assign(static_cast<size_t>(n_slots), 0);
  c.weight_sums_.assign(static_cast<size_t>(n_slots), nullptr);
  return c;
}

size_t PagedKvCache::SlotIndex(int32_t layer, int32_t seq, int32_t pos) const {
  FERRY_DCHECK(layer >= 0 && layer < n_layers_ && pos >= 0 &&
               groups_.layer_index[static_cast<size_t>(layer)] >= 0);
  const auto& table =
      tables_[static_cast<size_t>(groups_.layer_group[static_cast<size_t>(layer)])][static_cast<size_t>(seq)];
  FERRY_CHECK(static_cast<size_t>(pos / block_size_) < table.size());
  const int32_t block = table[static_cast<size_t>(pos / block_size_)];
  FERRY_CHECK(block >= 0);  // not a block that has left a sliding window
  return LayerBase(layer) + static_cast<size_t>(block) * block_size_ + pos % block_size_;
}

kernels::KvBlocks PagedKvCache::View(int32_t layer, int32_t seq) const {
  FERRY_CHECK(groups_.layer_index[static_cast<size_t>(layer)] >= 0);  // another pipeline stage's layer
  const auto& table =
      tables_[static_cast<size_t>(groups_.layer_group[static_cast<size_t>(layer)])][static_cast<size_t>(seq)];
  kernels::KvBlocks view{nullptr, nullptr, table.data(), block_size_};
  kv_.Attach(view, LayerBase(layer));
  return view;
}

void PagedKvCache::SetBlockTable(int32_t slot, std::span<const int32_t> blocks, int32_t group) {
  FERRY_CHECK(slot >= 0 && static_cast<size_t>(slot) < slot_shift_.size());
  FERRY_CHECK(group >= 0 && group < groups_.num_groups());
  for (int32_t b : blocks) FERRY_CHECK(b < num_blocks_);  // negative: left the window, never read
  tables_[static_cast<size_t>(group)][static_cast<size_t>(slot)].assign(blocks.begin(), blocks.end());
  slot_shift_[static_cast<size_t>(slot)] = 0;
  weight_sums_[static_cast<size_t>(slot)] = nullptr;
}

void PagedKvCache::SetKeptLayout(int32_t slot, int32_t shift, float* weight_sums) {
  FERRY_CHECK(slot >= 0 && static_cast<size_t>(slot) < slot_shift_.size() && shift <= 0);
  slot_shift_[static_cast<size_t>(slot)] = shift;
  weight_sums_[static_cast<size_t>(slot)] = weight_sums;
}

void PagedKvCache::MoveRow(int32_t slot, int32_t from, int32_t to) {
  for (int32_t l = 0; l < n_layers_; ++l)
    if (groups_.layer_index[static_cast<size_t>(l)] >= 0)
      kv_.CopySlots(SlotIndex(l, slot, to), SlotIndex(l, slot, from), 1);
}

void PagedKvCache::CopyBlock(int32_t src, int32_t dst) {
  FERRY_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_);
  const size_t bs = static_cast<size_t>(block_size_);
  for (int32_t j = 0; j < groups_.layers_per_group; ++j) {
    const size_t base = static_cast<size_t>(j) * num_blocks_ * bs;
    kv_.CopySlots(base + dst * bs, base + src * bs, bs);
  }
}

size_t PagedKvCache::BlockContentBytes() const {
  return static_cast<size_t>(groups_.layers_per_group) * kv_.ExportBytes(static_cast<size_t>(block_size_));
}

void PagedKvCache::ReadBlock(int32_t block, uint8_t* out) const {
  FERRY_CHECK(block >= 0 && block < num_blocks_);
  const size_t bs = static_cast<size_t>(block_size_), layer_bytes = kv_.ExportBytes(bs);
  for (int32_t j = 0; j < groups_.layers_per_group; ++j)
    kv_.Export((static_cast<size_t>(j) * num_blocks_ + block) * bs, bs, out + j * layer_bytes);
}

void PagedKvCache::WriteBlock(int32_t block, const uint8_t* in) {
  FERRY_CHECK(block >= 0 && block < num_blocks_);
  const size_t bs = static_cast<size_t>(block_size_), layer_bytes = kv_.ExportBytes(bs);
  for (int32_t j = 0; j < groups_.layers_per_group; ++j)
    kv_.Import((static_cast<size_t>(j) * num_blocks_ + block) * bs, bs, in + j * layer_bytes);
}

}  // namespace ferry
