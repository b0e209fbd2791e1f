// KvCacheManager::Truncate: rolling back rejected speculative tokens returns blocks across
// block boundaries, keeps the pool's accounting balanced over many random rollbacks, and
// respects blocks shared by forks and the prefix cache (copy-on-write before the next append).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "test_util.h"

namespace ferry::kv {
namespace {

using testing::Iota;

TEST(KvTruncate, FreesBlocksAcrossBlockBoundaries) {
  KvCacheManager m({8, 4, true});
  KvSequence s;
  ASSERT_TRUE(m.AllocateSlots(s, 11));  // 3 blocks: [0,4) [4,8) [8,11)
  EXPECT_EQ(m.NumFreeBlocks(), 5);
  m.Truncate(s, 9);  // still 3 blocks
  EXPECT_EQ(s.blocks().size(), 3u);
  EXPECT_EQ(s.num_slots(), 9);
  m.Truncate(s, 8);  // exactly two full blocks
  EXPECT_EQ(s.blocks().size(), 2u);
  EXPECT_EQ(m.NumFreeBlocks(), 6);
  m.Truncate(s, 3);
  EXPECT_EQ(s.blocks().size(), 1u);
  EXPECT_EQ(m.NumFreeBlocks(), 7);
  ASSERT_TRUE(m.AllocateSlots(s, 7));  // grows again from the truncated end
  EXPECT_EQ(s.blocks().size(), 2u);
  m.Truncate(s, 0);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(m.NumFreeBlocks(), 8);
}

TEST(KvTruncate, ManyRandomRollbacksKeepTheAccountingBalanced) {
  // Speculative steps: reserve computed + 1 + k slots, accept a random number, roll back.
  KvCacheManager m({64, 4, true});
  std::mt19937 rng(7);
  std::vector<KvSequence> seqs(6);
  std::vector<int32_t> computed(6, 0);
  int rollbacks = 0;
  for (int step = 0; step < 2000; ++step) {
    const size_t i = static_cast<size_t>(rng() % seqs.size());
    const int32_t k = 1 + static_cast<int32_t>(rng() % 6);
    const int32_t want = computed[i] + 1 + k;
    if (want > 40) {  // finished: release and start again
      seqs[i].Release();
      computed[i] = 0;
      continue;
    }
    if (!m.AllocateSlots(seqs[i], want)) continue;
    const int32_t accepted = static_cast<int32_t>(rng() % static_cast<uint32_t>(k + 1));
    computed[i] += 1 + accepted;
    m.Truncate(seqs[i], computed[i]);
    rollbacks += accepted < k;
    int32_t held = 0;
    for (size_t j = 0; j < seqs.size(); ++j) {
      ASSERT_EQ(seqs[j].num_slots(), computed[j]);
      ASSERT_EQ(static_cast<int32_t>(seqs[j].blocks().size()), m.BlocksFor(computed[j]));
      held += static_cast<int32_t>(seqs[j].blocks().size());
    }
    ASSERT_EQ(m.NumFreeBlocks(), m.num_blocks() - held) << "step " << step;
  }
  EXPECT_GT(rollbacks, 500);
  for (KvSequence& s : seqs) s.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 64);
}

TEST(KvTruncate, ForkedSharedBlocksAreOnlyUnreferencedAndCopiedBeforeAppend) {
  KvCacheManager m({16, 4, true});
  KvSequence parent;
  ASSERT_TRUE(m.AllocateSlots(parent, 6));  // blocks A [0,4) full, B [4,6) partial
  KvSequence child = m.Fork(parent);
  const std::vector<BlockId> shared = parent.blocks();
  ASSERT_TRUE(m.AllocateSlots(child, 10));  // child: copy of B (shared partial) + a new block
  EXPECT_EQ(child.blocks()[0], shared[0]);
  EXPECT_NE(child.blocks()[1], shared[1]);
  // Roll the child back into its shared first block: the parent keeps everything.
  m.Truncate(child, 2);
  EXPECT_EQ(child.blocks(), std::vector<BlockId>{shared[0]});
  EXPECT_EQ(m.pool().RefCount(shared[0]), 2);
  EXPECT_EQ(m.pool().RefCount(shared[1]), 1);
  EXPECT_EQ(parent.blocks(), shared);
  // Appending into the shared, now partial block must copy it first (the parent's slots 2, 3
  // hold its own tokens).
  auto a = m.AllocateSlots(child, 3);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->copies.size(), 1u);
  EXPECT_EQ(a->copies[0].src, shared[0]);
  EXPECT_EQ(child.blocks()[0], a->copies[0].dst);
  EXPECT_EQ(m.pool().RefCount(shared[0]), 1);
  child.Release();
  parent.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 16);
}

TEST(KvTruncate, PrefixCachedBlocksStayIntactAfterRollingBackIntoThem) {
  KvCacheManager m({16, 4, true});
  const std::vector<int32_t> tokens = Iota(9, 100);
  KvSequence s;
  ASSERT_TRUE(m.AllocateSlots(s, 9));
  m.CacheFullBlocks(s, tokens, 9);  // blocks 0 and 1 registered
  const BlockId cached = s.blocks()[1];
  ASSERT_TRUE(m.pool().IsCached(cached));
  m.Truncate(s, 6);  // block 1 becomes partial: its hash is dropped from the sequence
  auto a = m.AllocateSlots(s, 7);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->copies.size(), 1u);  // copy-on-write keeps the cached content intact
  EXPECT_EQ(a->copies[0].src, cached);
  EXPECT_NE(s.blocks()[1], cached);
  EXPECT_TRUE(m.pool().IsCached(cached));
  // Another request with the same prefix still hits both cached blocks.
  PrefixHit hit = m.FindCachedPrefix(tokens);
  EXPECT_EQ(hit.num_tokens, 8);
  // Re-registering the rewritten block does not steal the hash (same content is cached already).
  m.CacheFullBlocks(s, tokens, 8);
  EXPECT_EQ(m.pool().Find(hit.hashes[1]), cached);
  s.Release();
  EXPECT_EQ(m.NumFreeBlocks(), 16);
}

}  // namespace
}  // namespace ferry::kv
