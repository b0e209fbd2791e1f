// KvCacheManager with KV groups: a sliding-window group's blocks go back to the pool as they
// leave the window of the next query, a prefix hit needs only the blocks inside the window of
// its end, forks share the released state, and SequenceBlocks bounds what a sequence holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "test_util.h"

namespace ferry::kv {
namespace {

using testing::Iota;

// Block size 4; group 0 full attention, group 1 a sliding window of 6 positions.
KvCacheConfig Hybrid(int32_t num_blocks) {
  return {num_blocks, 4, true, {0, 6}};
}

int32_t Held(const std::vector<BlockId>& t) {
  return static_cast<int32_t>(std::count_if(t.begin(), t.end(), [](BlockId b) { return b >= 0; }));
}

TEST(KvGroups, ReleasesExactlyTheBlocksBeforeTheNextQuerysWindow) {
  KvCacheManager m(Hybrid(64));
  ASSERT_EQ(m.num_groups(), 2);
  KvSequence s;
  ASSERT_TRUE(m.AllocateSlots(s, 12));  // 3 blocks in each group
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 6);
  // A query at 8 attends 3..8: block 0 (positions 0..3) is still read.
  EXPECT_EQ(m.ReleaseOutOfWindow(s, 8), 0);
  // At 9 it attends 4..9: block 0 is out of the window for good.
  EXPECT_EQ(m.ReleaseOutOfWindow(s, 9), 1);
  EXPECT_EQ(s.blocks(1)[0], kReleasedBlock);
  EXPECT_EQ(Held(s.blocks(0)), 3);  // the full group keeps everything
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 5);
  EXPECT_EQ(m.ReleaseOutOfWindow(s, 12), 0);  // idempotent
  ASSERT_TRUE(m.AllocateSlots(s, 40));
  EXPECT_EQ(m.ReleaseOutOfWindow(s, 40), 7);  // 40 attends 35..40: blocks 8 and 9 stay
  EXPECT_EQ(Held(s.blocks(1)), 2);
  EXPECT_EQ(s.blocks(1)[8] >= 0 && s.blocks(1)[9] >= 0, true);
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 10 - 2);
  s.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 64);
}

TEST(KvGroups, WithoutSlidingGroupsNothingIsReleased) {
  KvCacheManager m({16, 4, true});
  EXPECT_EQ(m.num_groups(), 1);
  KvSequence s;
  ASSERT_TRUE(m.AllocateSlots(s, 40));
  EXPECT_EQ(m.ReleaseOutOfWindow(s, 40), 0);
  EXPECT_EQ(m.NumFreeBlocks(), 6);
}

TEST(KvGroups, PrefixHitNeedsOnlyTheSlidingBlocksInsideItsEndsWindow) {
  // Exactly one 30-token sequence's blocks: 8 per group.
  KvCacheManager m(Hybrid(16));
  const std::vector<int32_t> toks = Iota(30);
  {
    KvSequence a;
    ASSERT_TRUE(m.AllocateSlots(a, 30));
    m.CacheFullBlocks(a, toks, 30);  // blocks 0..6 full in both groups
    EXPECT_EQ(m.ReleaseOutOfWindow(a, 30), 6);
  }
  // Free now, in eviction order: the two partial blocks, sliding 0..5 (released first), full
  // 6..0, sliding 6.
  PrefixHit hit = m.FindCachedPrefix(toks);
  EXPECT_EQ(hit.num_tokens, 28);
  ASSERT_EQ(hit.tables.size(), 2u);
  EXPECT_EQ(Held(hit.tables[0]), 7);
  // Position 28 attends 23..28: sliding blocks 5 and 6; 0..4 are not taken.
  EXPECT_EQ(hit.tables[1],
            (std::vector<BlockId>{kReleasedBlock, kReleasedBlock, kReleasedBlock, kReleasedBlock,
                                  kReleasedBlock, hit.tables[1][5], hit.tables[1][6]}));
  EXPECT_GE(hit.tables[1][5], 0);
  EXPECT_GE(hit.tables[1][6], 0);

  // Another sequence evicts the sliding blocks before that window: the hit is whole.
  KvSequence c;
  ASSERT_TRUE(m.AllocateSlots(c, 12));  // 6 blocks: the 2 partial ones, sliding 0..3
  EXPECT_EQ(m.pool().NumEvictions(), 4);
  EXPECT_EQ(m.FindCachedPrefix(toks).num_tokens, 28);
  // Then sliding 4 and 5: the window of 28 needs block 5, and each shorter hit's window
  // (24: blocks 4, 5; 20: 3, 4; ...) a block that is gone too, although the full group still
  // caches all 7: no hit.
  ASSERT_TRUE(m.AllocateSlots(c, 16));
  EXPECT_EQ(m.pool().NumEvictions(), 6);
  EXPECT_EQ(m.FindCachedPrefix(toks).num_tokens, 0);
}

TEST(KvGroups, TakingAWindowedHitHoldsOnlyItsBlocks) {
  KvCacheManager m(Hybrid(64));
  const std::vector<int32_t> toks = Iota(30);
  {
    KvSequence a;
    ASSERT_TRUE(m.AllocateSlots(a, 30));
    m.CacheFullBlocks(a, toks, 30);
    m.ReleaseOutOfWindow(a, 30);
  }
  PrefixHit hit = m.FindCachedPrefix(toks);
  ASSERT_EQ(hit.num_tokens, 28);
  KvSequence b;
  ASSERT_TRUE(m.AllocateSlots(b, 30, &hit));
  EXPECT_EQ(Held(b.blocks(0)), 8);  // 7 hit + 1 new
  EXPECT_EQ(Held(b.blocks(1)), 3);  // 2 hit + 1 new
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 11);
  EXPECT_EQ(m.ReleaseOutOfWindow(b, 28), 0);  // already at the hit's window
  m.CacheFullBlocks(b, toks, 30);             // nothing new, and no released entry touched
  b.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 64);
}

TEST(KvGroups, AnAllSlidingModelHitsEvenWhenItsFirstBlocksAreEvicted) {
  KvCacheManager m({8, 4, true, {6}});
  const std::vector<int32_t> toks = Iota(30);
  {
    KvSequence a;
    ASSERT_TRUE(m.AllocateSlots(a, 30));
    m.CacheFullBlocks(a, toks, 30);
    m.ReleaseOutOfWindow(a, 30);
  }
  KvSequence c;
  ASSERT_TRUE(m.AllocateSlots(c, 8));  // the partial block, then block 0 of the chain
  EXPECT_EQ(m.pool().NumEvictions(), 1);
  PrefixHit hit = m.FindCachedPrefix(toks);
  EXPECT_EQ(hit.num_tokens, 28);
  EXPECT_EQ(Held(hit.tables[0]), 2);
}

TEST(KvGroups, ForkedBranchesReleaseTheirOwnReferences) {
  KvCacheManager m(Hybrid(64));
  KvSequence parent;
  ASSERT_TRUE(m.AllocateSlots(parent, 12));
  KvSequence child = m.Fork(parent);
  EXPECT_EQ(m.ReleaseOutOfWindow(parent, 12), 1);
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 6);  // the child still holds sliding block 0
  EXPECT_GE(child.blocks(1)[0], 0);
  EXPECT_EQ(m.ReleaseOutOfWindow(child, 12), 1);
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 5);
  KvSequence grandchild = m.Fork(child);  // a fork of a released table holds no released block
  EXPECT_EQ(grandchild.blocks(1)[0], kReleasedBlock);
  EXPECT_EQ(m.NumFreeBlocks(), 64 - 5);
}

// A sequence decoded (or prefilled in passes of `pass` tokens) to `len` positions never holds
// more than SequenceBlocks, and holds exactly that at some point.
void CheckSequenceBlocks(int32_t window, int32_t pass, int32_t len, int64_t expected) {
  KvCacheManager m({256, 4, true, {0, window}});
  EXPECT_EQ(m.SequenceBlocks(len, pass), expected);
  KvSequence s;
  int64_t peak = 0;
  for (int32_t pos = 0; pos < len; pos += pass) {
    ASSERT_TRUE(m.AllocateSlots(s, std::min(len, pos + pass)));
    peak = std::max<int64_t>(peak, 256 - m.NumFreeBlocks());
    m.ReleaseOutOfWindow(s, std::min(len, pos + pass));
  }
  EXPECT_EQ(peak, expected) << "window " << window << " pass " << pass;
}

TEST(KvGroups, SequenceBlocksIsWhatASequenceHoldsAtMost) {
  CheckSequenceBlocks(6, 1, 97, 25 + 3);   // 6 positions touch at most 3 blocks of 4
  CheckSequenceBlocks(6, 8, 104, 26 + 4);  // a pass's 8 queries: 13 positions, 4 blocks
  CheckSequenceBlocks(4, 1, 97, 25 + 2);
  CheckSequenceBlocks(64, 1, 20, 5 + 5);  // shorter than the window: every block
}

}  // namespace
}  // namespace ferry::kv
