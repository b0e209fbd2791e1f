// The KV caches' INT8 key copy (progressive attention): absent until enabled, then addressed
// like the f32 keys, exposed through View(), and carried by every copy the paged cache makes
// of its keys (copy-on-write of a block, compaction of a row).
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/paged_kv_cache.h"

namespace ferry {
namespace {

constexpr int32_t kLayers = 2, kBlocks = 4, kBlockSize = 4, kKvHeads = 2, kHeadDim = 8;

// Fills slot `slot` of batch slot `seq` in `layer` with a pattern unique to `tag`.
void WriteInt8Row(KvCache& kv, int32_t layer, int32_t seq, int32_t slot, int tag) {
  int8_t* k = kv.KeySlotInt8(layer, seq, slot);
  float* s = kv.KeyScaleSlot(layer, seq, slot);
  for (int i = 0; i < kKvHeads * kHeadDim; ++i) k[i] = static_cast<int8_t>(tag * 7 + i);
  for (int h = 0; h < kKvHeads; ++h) s[h] = 0.5f * tag + h;
}
std::vector<int8_t> Int8Row(KvCache& kv, int32_t layer, int32_t seq, int32_t slot) {
  const int8_t* k = kv.KeySlotInt8(layer, seq, slot);
  return {k, k + kKvHeads * kHeadDim};
}
std::vector<float> Scales(KvCache& kv, int32_t layer, int32_t seq, int32_t slot) {
  const float* s = kv.KeyScaleSlot(layer, seq, slot);
  return {s, s + kKvHeads};
}

TEST(KvCacheInt8Keys, ContiguousCacheExposesTheCopyOnlyOnceEnabled) {
  auto kv = ContiguousKvCache::Create(kLayers, 2, 16, kKvHeads, kHeadDim);
  ASSERT_TRUE(kv.ok());
  const size_t plain = kv->Bytes();
  EXPECT_EQ(kv->KeySlotInt8(0, 0, 0), nullptr);
  EXPECT_EQ(kv->View(1, 1).k_i8, nullptr);
  ASSERT_TRUE(kv->EnableInt8Keys().ok());
  EXPECT_EQ(kv->Bytes() - plain, plain / 2 / 4 + plain / 2 / kHeadDim);  // int8 keys + f32 scales
  WriteInt8Row(*kv, 1, 1, 5, 3);
  // View(layer, seq) addresses slot p of seq through block_table[0] = seq, like the f32 keys.
  const kernels::KvBlocks v = kv->View(1, 1);
  const size_t block = static_cast<size_t>(v.block_table[0]);
  const size_t row = (block * 16 + 5) * kKvHeads;
  EXPECT_EQ(v.k_i8 + row * kHeadDim, kv->KeySlotInt8(1, 1, 5));
  EXPECT_EQ(v.k_i8_scale + row, kv->KeyScaleSlot(1, 1, 5));
  EXPECT_EQ(v.k_cache + row * kHeadDim, kv->KeySlot(1, 1, 5));
}

TEST(KvCacheInt8Keys, PagedCacheCarriesTheCopyThroughCopyOnWriteAndCompaction) {
  auto kv = PagedKvCache::Create(kLayers, kBlocks, kBlockSize, kKvHeads, kHeadDim, 2, 16);
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(kv->EnableInt8Keys().ok());
  const std::vector<int32_t> shared = {2, 0}, copy = {2, 3};
  kv->SetBlockTable(0, shared);
  kv->SetBlockTable(1, copy);
  // Slots 4..6 (a partly filled block 0) written through seq 0, then block 0 copied to 3.
  for (int32_t l = 0; l < kLayers; ++l)
    for (int32_t p = 4; p < 7; ++p) WriteInt8Row(*kv, l, 0, p, 10 * l + p);
  kv->CopyBlock(0, 3);
  for (int32_t l = 0; l < kLayers; ++l)
    for (int32_t p = 4; p < 7; ++p) {
      EXPECT_EQ(Int8Row(*kv, l, 1, p), Int8Row(*kv, l, 0, p)) << l << " " << p;
      EXPECT_EQ(Scales(*kv, l, 1, p), Scales(*kv, l, 0, p)) << l << " " << p;
    }
  // The copy is independent: writing seq 1's row leaves seq 0's alone.
  WriteInt8Row(*kv, 0, 1, 6, 99);
  EXPECT_NE(Int8Row(*kv, 0, 1, 6), Int8Row(*kv, 0, 0, 6));
  // Compaction moves slot 6 to slot 1 (across blocks) in every layer.
  const std::vector<int8_t> moved = Int8Row(*kv, 1, 0, 6);
  const std::vector<float> moved_scales = Scales(*kv, 1, 0, 6);
  kv->MoveRow(0, 6, 1);
  EXPECT_EQ(Int8Row(*kv, 1, 0, 1), moved);
  EXPECT_EQ(Scales(*kv, 1, 0, 1), moved_scales);
  // View() attaches the copy with the f32 keys' block layout.
  const kernels::KvBlocks v = kv->View(1, 1);
  const size_t row = (static_cast<size_t>(v.block_table[1]) * kBlockSize + 2) * kKvHeads;
  EXPECT_EQ(v.k_i8 + row * kHeadDim, kv->KeySlotInt8(1, 1, 6));
  EXPECT_EQ(v.k_i8_scale + row, kv->KeyScaleSlot(1, 1, 6));
}

}  // namespace
}  // namespace ferry
