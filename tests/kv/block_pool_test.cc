// BlockPool: ref counts, free-list order (uncached first, cached in LRU order), prefix map.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace ferry::kv {
namespace {

TEST(BlockPool, AllocatesEveryBlockOnceThenRunsOut) {
  BlockPool pool(4);
  std::vector<BlockId> got;
  for (int i = 0; i < 4; ++i) {
    auto b = pool.Allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(pool.RefCount(*b), 1);
    got.push_back(*b);
  }
  EXPECT_FALSE(pool.Allocate().has_value());
  EXPECT_EQ(pool.NumFree(), 0);
  for (BlockId b : got) pool.Unref(b);
  EXPECT_EQ(pool.NumFree(), 4);
}

TEST(BlockPool, CachedBlockSurvivesFreeAndIsRevivedByRef) {
  BlockPool pool(3);
  BlockId a = *pool.Allocate();
  pool.MarkCached(a, 42);
  pool.Unref(a);
  EXPECT_EQ(pool.NumFree(), 3);
  ASSERT_EQ(pool.Find(42), a);
  pool.Ref(a);  // prefix hit on a free cached block
  EXPECT_EQ(pool.RefCount(a), 1);
  EXPECT_EQ(pool.NumFree(), 2);
  // The other two blocks are handed out without evicting `a`.
  BlockId b = *pool.Allocate(), c = *pool.Allocate();
  EXPECT_NE(b, a);
  EXPECT_NE(c, a);
  EXPECT_FALSE(pool.Allocate().has_value());
  EXPECT_EQ(pool.Find(42), a);
}

TEST(BlockPool, UncachedFreeBlocksGoFirstThenCachedInLruOrder) {
  BlockPool pool(3);
  BlockId a = *pool.Allocate(), b = *pool.Allocate(), c = *pool.Allocate();
  pool.MarkCached(a, 1);
  pool.MarkCached(b, 2);
  pool.Unref(a);  // least recently used cached block
  pool.Unref(b);
  pool.Unref(c);  // never cached: reused first
  EXPECT_EQ(*pool.Allocate(), c);
  EXPECT_EQ(pool.NumCached(), 2);
  EXPECT_EQ(*pool.Allocate(), a);  // evicts hash 1
  EXPECT_FALSE(pool.Find(1).has_value());
  EXPECT_EQ(pool.Find(2), b);
  EXPECT_EQ(pool.NumEvictions(), 1);
}

TEST(BlockPool, SameHashTwiceKeepsTheFirstBlock) {
  BlockPool pool(2);
  BlockId a = *pool.Allocate(), b = *pool.Allocate();
  pool.MarkCached(a, 7);
  pool.MarkCached(b, 7);
  EXPECT_EQ(pool.Find(7), a);
  EXPECT_TRUE(pool.IsCached(a));
  EXPECT_FALSE(pool.IsCached(b));
  pool.Unref(b);
  pool.Unref(a);
  EXPECT_EQ(pool.NumFree(), 2);
}

TEST(BlockHash, ChainsOverParentAndTokens) {
  std::vector<int32_t> x = {1, 2, 3, 4}, y = {1, 2, 3, 5};
  EXPECT_EQ(HashBlock(kRootBlockHash, x), HashBlock(kRootBlockHash, x));
  EXPECT_NE(HashBlock(kRootBlockHash, x), HashBlock(kRootBlockHash, y));
  EXPECT_NE(HashBlock(kRootBlockHash, x), HashBlock(HashBlock(kRootBlockHash, y), x));
}

}  // namespace
}  // namespace ferry::kv
