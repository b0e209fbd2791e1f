// KvGroupLayout: which KV group each layer's blocks belong to (full-attention groups first,
// gcd-sized so no group is padded), and PagedKvCache reading and writing each layer through its
// group's table, a block holding that group's layers only.
#include "model/kv_group_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "model/paged_kv_cache.h"

namespace ferry {
namespace {

ModelConfig Sliding(std::vector<uint8_t> swa, int32_t window = 32) {
  ModelConfig c;
  c.n_layers = static_cast<int32_t>(swa.size());
  c.sliding_window = window;
  c.swa_layers = std::move(swa);
  return c;
}

TEST(KvGroupLayout, Gemma3FiveSlidingToOneGlobalMakesSixOneLayerGroups) {
  const KvGroupLayout g = KvGroupLayout::ForModel(Sliding({1, 1, 1, 1, 1, 0}), 512);
  EXPECT_EQ(g.layers_per_group, 1);
  EXPECT_EQ(g.windows, (std::vector<int32_t>{0, 32, 32, 32, 32, 32}));
  EXPECT_EQ(g.layer_group, (std::vector<int32_t>{1, 2, 3, 4, 5, 0}));
  EXPECT_EQ(g.layer_index, (std::vector<int32_t>{0, 0, 0, 0, 0, 0}));
}

TEST(KvGroupLayout, Gemma2AlternatingMakesTwoGroupsOfHalfTheLayers) {
  const KvGroupLayout g = KvGroupLayout::ForModel(Sliding({1, 0, 1, 0}), 512);
  EXPECT_EQ(g.layers_per_group, 2);
  EXPECT_EQ(g.windows, (std::vector<int32_t>{0, 32}));
  EXPECT_EQ(g.layer_group, (std::vector<int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(g.layer_index, (std::vector<int32_t>{0, 0, 1, 1}));
}

TEST(KvGroupLayout, GroupSizeIsTheGcdOfTheLayerCounts) {
  std::vector<uint8_t> swa;  // gemma3-1b: 26 layers, every sixth global: 4 global, 22 sliding
  for (int l = 0; l < 26; ++l) swa.push_back(l % 6 == 5 ? 0 : 1);
  const KvGroupLayout g = KvGroupLayout::ForModel(Sliding(swa, 512), 32768);
  EXPECT_EQ(g.layers_per_group, 2);
  ASSERT_EQ(g.num_groups(), 13);
  EXPECT_EQ(g.windows[0], 0);
  EXPECT_EQ(g.windows[1], 0);
  EXPECT_EQ(g.windows[2], 512);
  EXPECT_EQ(g.layer_group[5], 0);
  EXPECT_EQ(g.layer_group[11], 0);
  EXPECT_EQ(g.layer_group[17], 1);
  EXPECT_EQ(g.layer_index[11], 1);
  std::vector<int32_t> per_group(13, 0);
  for (int l = 0; l < 26; ++l) ++per_group[static_cast<size_t>(g.layer_group[static_cast<size_t>(l)])];
  EXPECT_EQ(per_group, std::vector<int32_t>(13, 2));
}

TEST(KvGroupLayout, OneGroupWhenNothingCanLeaveAWindow) {
  // No sliding layers, or a window as long as the context: every block of every layer kept.
  for (const KvGroupLayout& g :
       {KvGroupLayout::ForModel(Sliding({0, 0, 0}), 512), KvGroupLayout::ForModel(Sliding({1, 0, 1, 0}), 32),
        KvGroupLayout::ForModel(Sliding({1, 0, 1, 0}, 0), 512)}) {
    EXPECT_EQ(g.num_groups(), 1);
    EXPECT_EQ(g.windows, std::vector<int32_t>{0});
    EXPECT_EQ(g.layers_per_group, g.num_layers());
  }
  // Every layer sliding: one sliding group.
  const KvGroupLayout all = KvGroupLayout::ForModel(Sliding({1, 1, 1}), 512);
  EXPECT_EQ(all.windows, std::vector<int32_t>{32});
  EXPECT_EQ(all.layers_per_group, 3);
}

std::vector<float> Row(float base) {
  std::vector<float> r(16);
  for (size_t i = 0; i < r.size(); ++i) r[i] = base + static_cast<float>(i);
  return r;
}

TEST(KvGroupLayout, PagedCacheAddressesEachLayerThroughItsGroupsTable) {
  const KvGroupLayout groups = KvGroupLayout::ForModel(Sliding({1, 0, 1, 0}), 512);
  auto kv = PagedKvCache::Create(4, 8, 4, 2, 8, 1, 16, KvCacheTypes::F32(), groups);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  const std::vector<int32_t> full = {5, 6}, sliding = {-2, 2};  // block 0 has left the window
  kv->SetBlockTable(0, full, 0);
  kv->SetBlockTable(0, sliding, 1);
  for (int32_t l = 0; l < 4; ++l) kv->StoreKey(l, 0, 5, Row(100.0f * l).data());
  // A block holds two layers: layer 2 (second of the sliding group) is one layer region after
  // layer 0 in the same physical block; layers 0 and 1 use their own groups' blocks.
  const size_t slot_bytes = kv->KeySlotBytes();
  EXPECT_EQ(kv->KeyBytes(2, 0, 5) - kv->KeyBytes(0, 0, 5), static_cast<std::ptrdiff_t>(8 * 4 * slot_bytes));
  EXPECT_EQ(kv->KeyBytes(0, 0, 5) - kv->KeyBytes(0, 0, 4), static_cast<std::ptrdiff_t>(slot_bytes));
  EXPECT_EQ(kv->View(0, 0).block_table[1], 2);
  EXPECT_EQ(kv->View(1, 0).block_table[1], 6);
  EXPECT_EQ(kv->BlockContentBytes(), PagedKvCache::BlockBytes(2, 4, 2, 8, KvCacheTypes::F32()));
  // Copy-on-write of a sliding block carries both of its layers, and no full layer's rows.
  kv->CopyBlock(2, 3);
  kv->SetBlockTable(0, std::vector<int32_t>{-2, 3}, 1);
  std::vector<float> got(16);
  for (int32_t l = 0; l < 4; ++l) {
    kv->LoadKey(l, 0, 5, got.data());
    EXPECT_EQ(got, Row(100.0f * l)) << "layer " << l;
  }
}

TEST(KvGroupLayout, APipelineStageHoldsOnlyItsLayers) {
  // One group: the stage's layers fill its blocks, the others are not held.
  const KvGroupLayout single = KvGroupLayout::Single(5).ForStage(3, 5);
  EXPECT_EQ(single.layers_per_group, 2);
  EXPECT_EQ(single.layer_index, (std::vector<int32_t>{-1, -1, -1, 0, 1}));
  EXPECT_EQ(single.layer_group, (std::vector<int32_t>{0, 0, 0, 0, 0}));
  // gemma2's two groups of two: the first stage holds one layer of each.
  const KvGroupLayout two = KvGroupLayout::ForModel(Sliding({1, 0, 1, 0}), 512).ForStage(0, 2);
  EXPECT_EQ(two.layers_per_group, 1);
  EXPECT_EQ(two.layer_index, (std::vector<int32_t>{0, 0, -1, -1}));
  EXPECT_EQ(two.windows, (std::vector<int32_t>{0, 32}));
  // A cache of the stage's layout: blocks of its 2 layers, written and read through them alone.
  auto kv = PagedKvCache::Create(5, 4, 4, 2, 8, 1, 16, KvCacheTypes::F32(), single);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ(kv->BlockContentBytes(), PagedKvCache::BlockBytes(2, 4, 2, 8, KvCacheTypes::F32()));
  kv->SetBlockTable(0, std::vector<int32_t>{1, 3}, 0);
  for (int32_t l = 3; l < 5; ++l) kv->StoreKey(l, 0, 6, Row(10.0f * l).data());
  std::vector<float> got(16);
  for (int32_t l = 3; l < 5; ++l) {
    kv->LoadKey(l, 0, 6, got.data());
    EXPECT_EQ(got, Row(10.0f * l)) << "layer " << l;
  }
  EXPECT_EQ(kv->KeyBytes(4, 0, 6) - kv->KeyBytes(3, 0, 6),
            static_cast<std::ptrdiff_t>(4 * 4 * kv->KeySlotBytes()));  // one layer region apart
  // Two layers at one place of a block is no layout.
  KvGroupLayout clash = single;
  clash.layer_index[4] = 0;
  EXPECT_FALSE(PagedKvCache::Create(5, 4, 4, 2, 8, 1, 16, KvCacheTypes::F32(), clash).ok());
}

}  // namespace
}  // namespace ferry
