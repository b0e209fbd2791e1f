// The prefix cache's tiers below the KV pool: the RAM tier's LRU order and byte accounting,
// the disk tier's files (across a reopen, LRU by file, truncated / bit-flipped / foreign files
// deleted and never returned), the block file parser, the spill from RAM to disk with its cost
// rule, and KvCacheManager handing evicted blocks down and restoring them bit for bit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "kv/block_file.h"
#include "kv/disk_block_tier.h"
#include "kv/kv_cache_manager.h"
#include "kv/ram_block_tier.h"
#include "kv/tiered_block_store.h"
#include "test_util.h"

namespace ferry::kv {
namespace {

namespace fs = std::filesystem;

BlockBytes Bytes(size_t n, uint8_t seed) {
  auto v = std::make_shared<std::vector<uint8_t>>(n);
  for (size_t i = 0; i < n; ++i) (*v)[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return v;
}

std::vector<BlockHash> Hashes(const std::vector<TierBlock>& blocks) {
  std::vector<BlockHash> h;
  for (const TierBlock& b : blocks) h.push_back(b.hash);
  return h;
}

TEST(RamBlockTier, EvictsLeastRecentlyUsedAndCountsBytes) {
  RamBlockTier t(250);
  EXPECT_TRUE(t.Put({1, 0, Bytes(100, 1)}).empty());
  EXPECT_TRUE(t.Put({2, 0, Bytes(100, 2)}).empty());
  EXPECT_EQ(t.bytes(), 200u);
  EXPECT_TRUE(t.Put({1, 0, Bytes(100, 1)}).empty()) << "a block already held is refreshed, not added";
  EXPECT_EQ(t.bytes(), 200u);
  // 1 was refreshed after 2, so 2 is the least recently used.
  EXPECT_EQ(Hashes(t.Put({3, 0, Bytes(100, 3)})), std::vector<BlockHash>{2});
  EXPECT_EQ(t.bytes(), 200u);
  ASSERT_NE(t.Get(1), nullptr);  // now 3 is the oldest
  EXPECT_EQ(Hashes(t.Put({4, 0, Bytes(60, 4)})), std::vector<BlockHash>{3});
  EXPECT_EQ(t.bytes(), 160u);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(*t.Get(4), *Bytes(60, 4));
  EXPECT_EQ(t.Get(2), nullptr);
  // Several go at once when a big block comes; one larger than the tier is handed back.
  EXPECT_EQ(Hashes(t.Put({5, 0, Bytes(240, 5)})), (std::vector<BlockHash>{1, 4}));
  EXPECT_EQ(t.bytes(), 240u);
  EXPECT_EQ(Hashes(t.Put({6, 0, Bytes(251, 6)})), std::vector<BlockHash>{6});
  EXPECT_EQ(t.bytes(), 240u);
  EXPECT_FALSE(t.Contains(6));
}

TEST(BlockFile, RoundTripsAndRejectsEveryKindOfDamage) {
  const BlockBytes payload = Bytes(300, 9);
  const std::vector<uint8_t> file = EncodeBlockFile(77, 1234, *payload);
  EXPECT_EQ(file.size(), payload->size() + kBlockFileOverheadBytes);
  auto ok = ParseBlockFile(file, 77, 1234);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(std::equal(ok->begin(), ok->end(), payload->begin(), payload->end()));

  auto fails = [&](std::vector<uint8_t> f, uint64_t fp, BlockHash h, const char* why) {
    auto r = ParseBlockFile(f, fp, h);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptFile);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  fails({file.begin(), file.begin() + 20}, 77, 1234, "truncated");
  fails({file.begin(), file.end() - 1}, 77, 1234, "truncated");
  fails({}, 77, 1234, "truncated");
  for (size_t at : {size_t{40}, size_t{200}, file.size() - 1}) {  // payload bytes and the checksum
    std::vector<uint8_t> f = file;
    f[at] ^= 0x10;
    fails(f, 77, 1234, "checksum");
  }
  std::vector<uint8_t> magic = file;
  magic[0] ^= 1;
  fails(magic, 77, 1234, "magic");
  fails(file, 78, 1234, "another model");
  fails(file, 77, 1235, "holds block");
}

class DiskBlockTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/tier";
    fs::remove_all(dir_);
  }
  DiskBlockTier Open(size_t capacity, uint64_t fingerprint = 5) {
    auto t = DiskBlockTier::Open({dir_, capacity, fingerprint});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::move(*t);
  }
  // A store of ram_bytes in RAM spilling to this folder, with a disk price already set.
  std::unique_ptr<TieredBlockStore> Store(size_t ram_bytes, uint64_t fingerprint, const DiskCostModel& cost) {
    PrefixTierConfig c;
    c.ram_bytes = ram_bytes;
    c.disk_dir = dir_;
    c.fingerprint = fingerprint;
    auto store = TieredBlockStore::Create(c);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    (*store)->SetDiskCost(cost);
    return std::move(*store);
  }
  std::string dir_;
};

TEST_F(DiskBlockTierTest, SurvivesAReopenAndEvictsByFile) {
  const size_t file = 100 + kBlockFileOverheadBytes;
  {
    DiskBlockTier t = Open(3 * file);
    for (BlockHash h : {1, 2, 3}) ASSERT_TRUE(t.Put(h, *Bytes(100, static_cast<uint8_t>(h))).ok());
    EXPECT_EQ(t.bytes(), 3 * file);
    ASSERT_NE(t.Get(1), nullptr);  // 2 is now the least recently used
    ASSERT_TRUE(t.Put(4, *Bytes(100, 4)).ok());
    EXPECT_FALSE(t.Contains(2));
    EXPECT_FALSE(fs::exists(t.PathFor(2))) << "an evicted block's file is deleted";
    EXPECT_EQ(t.bytes(), 3 * file);
  }
  DiskBlockTier t = Open(3 * file);  // a new process on the same folder
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.bytes(), 3 * file);
  for (BlockHash h : {1, 3, 4}) {
    BlockBytes b = t.Get(h);
    ASSERT_NE(b, nullptr) << h;
    EXPECT_EQ(*b, *Bytes(100, static_cast<uint8_t>(h)));
  }
  EXPECT_EQ(t.Get(2), nullptr);
  // Reopened smaller, the least recently modified files go first.
  fs::last_write_time(t.PathFor(1), fs::file_time_type::clock::now() - std::chrono::hours(2));
  fs::last_write_time(t.PathFor(3), fs::file_time_type::clock::now() - std::chrono::hours(1));
  DiskBlockTier small = Open(file + 10);
  EXPECT_EQ(small.size(), 1u);
  EXPECT_TRUE(small.Contains(4));
  EXPECT_FALSE(fs::exists(small.PathFor(1)));
  EXPECT_FALSE(fs::exists(small.PathFor(3)));
}

TEST_F(DiskBlockTierTest, DamagedAndForeignFilesAreDeletedNeverReturned) {
  DiskBlockTier t = Open(size_t{1} << 20);
  for (BlockHash h : {1, 2, 3, 4}) ASSERT_TRUE(t.Put(h, *Bytes(100, static_cast<uint8_t>(h))).ok());
  fs::resize_file(t.PathFor(1), 60);  // truncated
  {
    std::fstream f(t.PathFor(2), std::ios::in | std::ios::out | std::ios::binary);  // one bit flipped
    f.seekp(70);
    f.put('\x5a');
  }
  {  // a file for the same block written by another model (other fingerprint)
    const std::vector<uint8_t> foreign = EncodeBlockFile(6, 3, *Bytes(100, 3));
    std::ofstream f(t.PathFor(3), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(foreign.data()), static_cast<std::streamsize>(foreign.size()));
  }
  for (BlockHash h : {1, 2, 3}) {
    EXPECT_EQ(t.Get(h), nullptr) << h;
    EXPECT_FALSE(t.Contains(h)) << h;
    EXPECT_FALSE(fs::exists(t.PathFor(h))) << h;
  }
  EXPECT_EQ(t.rejected(), 3);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.bytes(), 100 + kBlockFileOverheadBytes);
  EXPECT_NE(t.Get(4), nullptr);
  // Another fingerprint on the same folder looks up other names: it never sees these blocks.
  DiskBlockTier other = Open(size_t{1} << 20, 6);
  EXPECT_FALSE(other.Contains(4));
  EXPECT_EQ(other.Get(4), nullptr);
  EXPECT_TRUE(fs::exists(t.PathFor(4))) << "another model's files are left alone";
  // Leftover temporary files of an interrupted write are removed at open.
  std::ofstream(dir_ + "/.0123456789abcdef.99.tmp") << "partial";
  Open(size_t{1} << 20);
  EXPECT_FALSE(fs::exists(dir_ + "/.0123456789abcdef.99.tmp"));
}

TEST_F(DiskBlockTierTest, StoreSpillsWhatRamDropsWhenReadingBeatsRecomputing) {
  // A read costs 1 s; recomputing costs 0.1 s + 0.1 s per earlier block: worth it from depth 10.
  auto store = Store(200, 5, {1.0, 0.1, 0.1});
  ASSERT_NE(store, nullptr);
  TieredBlockStore& s = *store;
  s.Offload({1, 2, Bytes(100, 1)});
  s.Offload({2, 12, Bytes(100, 2)});
  s.Offload({3, 0, Bytes(100, 3)});  // drops 1 (depth 2: cheaper to recompute)
  s.Offload({4, 0, Bytes(100, 4)});  // drops 2 (depth 12: to disk)
  TierStats st = s.stats();
  EXPECT_EQ(st.ram_bytes, 200u);
  EXPECT_EQ(st.disk_writes, 1);
  EXPECT_EQ(st.disk_skipped, 1);
  EXPECT_EQ(s.Fetch(1), std::nullopt);
  auto two = s.Fetch(2);
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->tier, BlockTier::kDisk);
  EXPECT_EQ(*two->bytes, *Bytes(100, 2));
  auto again = s.Fetch(2);  // promoted back into RAM
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->tier, BlockTier::kRam);
  EXPECT_EQ(s.Fetch(4)->tier, BlockTier::kRam);
}

// Under sliding-window KV groups a block holds one group's layers: it is worth a disk read only
// against its share of the recompute.
TEST_F(DiskBlockTierTest, StorePricesABlockAtItsGroupsShareOfTheRecompute) {
  // Read 1 s; recompute 0.1 s + 0.1 s per earlier block for the whole model, half of it per block.
  auto store = Store(100, 6, {1.0, 0.1, 0.1, 0.5});
  ASSERT_NE(store, nullptr);
  TieredBlockStore& s = *store;
  s.Offload({1, 12, Bytes(100, 1)});  // 0.65 s of recompute
  s.Offload({2, 20, Bytes(100, 2)});  // drops 1 (cheaper to recompute); 1.05 s
  s.Offload({3, 0, Bytes(100, 3)});   // drops 2: to disk
  const TierStats st = s.stats();
  EXPECT_EQ(st.disk_skipped, 1);
  EXPECT_EQ(st.disk_writes, 1);
  EXPECT_EQ(s.Fetch(1), std::nullopt);
  ASSERT_TRUE(s.Fetch(2).has_value());
}

// Block bytes held in plain vectors, standing in for the paged KV tensors.
class FakeContent final : public BlockContent {
 public:
  FakeContent(int32_t num_blocks, size_t bytes)
      : blocks_(static_cast<size_t>(num_blocks), std::vector<uint8_t>(bytes)) {}
  size_t BlockBytes() const override { return blocks_[0].size(); }
  Status Read(BlockId b, uint8_t* out) const override {
    // A split model's content fails when a rank is unreachable; then it may have written part.
    std::copy(blocks_[static_cast<size_t>(b)].begin(), blocks_[static_cast<size_t>(b)].end(), out);
    return unreachable_ ? IoError("rank 1 is unreachable") : Status::Ok();
  }
  Status Write(BlockId b, const uint8_t* in) override {
    std::copy(in, in + BlockBytes(), blocks_[static_cast<size_t>(b)].begin());
    return Status::Ok();
  }
  std::vector<uint8_t>& block(BlockId b) { return blocks_[static_cast<size_t>(b)]; }
  void set_unreachable(bool u) { unreachable_ = u; }

 private:
  std::vector<std::vector<uint8_t>> blocks_;
  bool unreachable_ = false;
};

// A pool of 4 blocks of 4 tokens whose evicted blocks (64 bytes each) go to a RAM tier of 8.
struct SmallTieredPool {
  static constexpr int32_t kBlocks = 4, kBs = 4;
  SmallTieredPool() : m({kBlocks, kBs, true}), content(kBlocks, 64) {
    PrefixTierConfig c;
    c.ram_bytes = 64 * 8;
    auto created = TieredBlockStore::Create(c);
    if (!created.ok()) return;  // the tests assert `store` before using the pool
    store = std::move(*created);
    m.AttachTiers(store.get(), &content);
  }
  KvCacheManager m;
  FakeContent content;
  std::unique_ptr<TieredBlockStore> store;
};

// A block whose bytes could not all be read (a follower rank gone) is never kept in a tier,
// where a later hit would restore it as if it were whole.
TEST(KvCacheManagerTiers, ABlockThatCannotBeReadIsNotKept) {
  SmallTieredPool p;
  ASSERT_NE(p.store, nullptr);
  const std::vector<int32_t> a = testing::Iota(13, 100);
  {
    KvSequence s;
    ASSERT_TRUE(p.m.AllocateSlots(s, 13).has_value());
    p.m.CacheFullBlocks(s, a, 13);
  }
  p.content.set_unreachable(true);
  {
    KvSequence other;
    ASSERT_TRUE(p.m.AllocateSlots(other, 16).has_value());  // evicts a's three blocks
  }
  EXPECT_EQ(p.store->stats().ram_blocks, 0);
  EXPECT_EQ(p.m.FindPrefix(a).num_tokens, 0);
}

TEST(KvCacheManagerTiers, EvictedBlocksComeBackBitForBit) {
  SmallTieredPool p;
  ASSERT_NE(p.store, nullptr);

  const std::vector<int32_t> a = testing::Iota(13, 100);  // 3 full blocks + 1 token
  std::vector<std::vector<uint8_t>> written;
  {
    KvSequence s;
    ASSERT_TRUE(p.m.AllocateSlots(s, 13).has_value());
    for (size_t i = 0; i < s.blocks().size(); ++i) {  // "compute" each block's K/V
      for (size_t j = 0; j < 64; ++j) p.content.block(s.blocks()[i])[j] = static_cast<uint8_t>(i * 50 + j);
      written.push_back(p.content.block(s.blocks()[i]));
    }
    p.m.CacheFullBlocks(s, a, 13);
  }
  {  // another sequence takes the whole pool: a's three cached blocks are evicted into RAM
    KvSequence other;
    ASSERT_TRUE(p.m.AllocateSlots(other, 16).has_value());
    for (BlockId b : other.blocks()) std::fill(p.content.block(b).begin(), p.content.block(b).end(), 0xEE);
    EXPECT_EQ(p.store->stats().ram_blocks, 3);
    EXPECT_EQ(p.store->stats().ram_bytes, 3u * 64);
    EXPECT_EQ(p.m.FindCachedPrefix(a).num_tokens, 0) << "the pool itself holds none of a any more";
  }
  PrefixHit hit = p.m.FindPrefix(a);
  EXPECT_EQ(hit.num_tokens, 12);
  ASSERT_EQ(hit.restores.size(), 3u);
  KvSequence s;
  auto alloc = p.m.AllocateSlots(s, 13, &hit);
  ASSERT_TRUE(alloc.has_value());
  EXPECT_EQ(s.num_slots(), 13);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(p.content.block(s.blocks()[i]), written[i]) << "block " << i;
  EXPECT_EQ(p.m.RestoredBlocks(BlockTier::kRam), 3);
  // Restored blocks are registered in the pool's prefix cache again.
  EXPECT_EQ(p.m.FindCachedPrefix(a).num_tokens, 12);
}

TEST(KvCacheManagerTiers, ChainContinuesAcrossPoolAndTierBlocks) {
  constexpr int32_t kBlocks = 6, kBs = 2;
  KvCacheManager m({kBlocks, kBs, true});
  FakeContent content(kBlocks, 8);
  PrefixTierConfig c;
  c.ram_bytes = 1024;
  auto store = TieredBlockStore::Create(c);
  ASSERT_TRUE(store.ok());
  m.AttachTiers(store->get(), &content);
  const std::vector<int32_t> a = testing::Iota(7, 1);  // 3 full blocks + 1
  {
    KvSequence s;
    ASSERT_TRUE(m.AllocateSlots(s, 7).has_value());
    m.CacheFullBlocks(s, a, 7);
  }
  // Freed last block first: the free list is [partial, never-used x2, block 2, block 1, block 0].
  {
    KvSequence other;
    ASSERT_TRUE(m.AllocateSlots(other, 8).has_value());  // takes 3 uncached + evicts a's block 2
  }
  PrefixHit hit = m.FindPrefix(a);
  ASSERT_EQ(hit.tables[0].size(), 3u);
  EXPECT_NE(hit.tables[0][0], kTierBlock);
  EXPECT_NE(hit.tables[0][1], kTierBlock);
  EXPECT_EQ(hit.tables[0][2], kTierBlock);
  ASSERT_EQ(hit.restores.size(), 1u);
  EXPECT_EQ(hit.restores[0].index, 2u);
}

}  // namespace
}  // namespace ferry::kv
