// KvCacheManager: on-demand allocation, prefix hits, copy-on-write after fork, RAII leases.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace ferry::kv {
namespace {

using testing::Iota;

TEST(KvCacheManager, AllocatesBlocksOnDemand) {
  KvCacheManager m({8, 4, true});
  KvSequence s;
  auto a = m.AllocateSlots(s, 5);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->new_blocks, 2);
  EXPECT_EQ(s.blocks().size(), 2u);
  EXPECT_EQ(m.AllocateSlots(s, 8)->new_blocks, 0);  // fits in the second block
  EXPECT_EQ(m.AllocateSlots(s, 9)->new_blocks, 1);
  EXPECT_EQ(m.NumFreeBlocks(), 5);
  s.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 8);
}

TEST(KvCacheManager, NoRoomIsAnOrdinaryResultAndChangesNothing) {
  KvCacheManager m({2, 4, true});
  KvSequence s;
  ASSERT_TRUE(m.AllocateSlots(s, 4));
  EXPECT_FALSE(m.AllocateSlots(s, 12).has_value());
  EXPECT_EQ(s.blocks().size(), 1u);
  EXPECT_EQ(s.num_slots(), 4);
  EXPECT_EQ(m.NumFreeBlocks(), 1);
}

TEST(KvCacheManager, LeaseReturnsBlocksWhenDestroyed) {
  KvCacheManager m({4, 4, true});
  {
    KvSequence s;
    ASSERT_TRUE(m.AllocateSlots(s, 16));
    EXPECT_EQ(m.NumFreeBlocks(), 0);
    KvSequence moved = std::move(s);
    EXPECT_TRUE(s.empty());
  }
  EXPECT_EQ(m.NumFreeBlocks(), 4);
}

TEST(KvCacheManager, PrefixHitReusesFullBlocksButNeverTheLastToken) {
  KvCacheManager m({16, 4, true});
  auto toks = Iota(10);
  KvSequence a;
  ASSERT_TRUE(m.AllocateSlots(a, 10));
  m.CacheFullBlocks(a, toks, 10);  // blocks [0,4) and [4,8) are full
  PrefixHit hit = m.FindCachedPrefix(toks);
  EXPECT_EQ(hit.num_tokens, 8);
  ASSERT_EQ(hit.tables[0].size(), 2u);
  EXPECT_EQ(hit.tables[0][0], a.blocks()[0]);
  // Exactly 8 tokens: the last block is not taken, so the last token is computed.
  EXPECT_EQ(m.FindCachedPrefix(Iota(8)).num_tokens, 4);
  // A different second block stops the match after the first.
  auto other = Iota(10);
  other[5] = 99;
  EXPECT_EQ(m.FindCachedPrefix(other).num_tokens, 4);

  KvSequence b;
  ASSERT_TRUE(m.AllocateSlots(b, 10, &hit));
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);
  EXPECT_EQ(b.blocks()[1], a.blocks()[1]);
  EXPECT_NE(b.blocks()[2], a.blocks()[2]);
  EXPECT_EQ(m.pool().RefCount(a.blocks()[0]), 2);
  // After both finish the cached blocks stay findable until the space is needed.
  a.Release();
  b.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 16);
  EXPECT_EQ(m.FindCachedPrefix(toks).num_tokens, 8);
}

TEST(KvCacheManager, PrefixCachingOffFindsNothing) {
  KvCacheManager m({16, 4, false});
  KvSequence a;
  auto toks = Iota(10);
  ASSERT_TRUE(m.AllocateSlots(a, 10));
  m.CacheFullBlocks(a, toks, 10);
  EXPECT_EQ(m.FindCachedPrefix(toks).num_tokens, 0);
}

TEST(KvCacheManager, ForkSharesBlocksAndCopiesTheSharedPartialBlockOnAppend) {
  KvCacheManager m({16, 4, true});
  KvSequence parent;
  ASSERT_TRUE(m.AllocateSlots(parent, 6));  // one full block + a partial one
  KvSequence child = m.Fork(parent);
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(m.pool().RefCount(parent.blocks()[1]), 2);
  const BlockId shared = parent.blocks()[1];
  auto a = m.AllocateSlots(child, 7);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->copies.size(), 1u);
  EXPECT_EQ(a->copies[0].src, shared);
  EXPECT_EQ(a->copies[0].dst, child.blocks()[1]);
  EXPECT_NE(child.blocks()[1], shared);
  EXPECT_EQ(child.blocks()[0], parent.blocks()[0]);  // full blocks stay shared
  // The parent is now the block's only owner: no copy.
  auto b = m.AllocateSlots(parent, 7);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->copies.empty());
  EXPECT_EQ(parent.blocks()[1], shared);
  parent.Release();
  child.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 16);
}

TEST(KvCacheManager, CowNeedsAFreeBlock) {
  KvCacheManager m({2, 4, true});
  KvSequence parent;
  ASSERT_TRUE(m.AllocateSlots(parent, 6));
  KvSequence child = m.Fork(parent);
  EXPECT_FALSE(m.AllocateSlots(child, 7).has_value());
  EXPECT_EQ(child.blocks(), parent.blocks());
}

}  // namespace
}  // namespace ferry::kv
