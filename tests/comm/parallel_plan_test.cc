// How a layout divides a model (model/parallel.h): shards, stages and column slices, without MPI.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/parallel.h"

namespace ferry {
namespace {

ModelConfig TinyLlamaShape() {
  ModelConfig c;
  c.arch = "llama";
  c.n_vocab = 32001;  // odd on purpose: the vocabulary does not divide
  c.dim = 2048;
  c.n_layers = 22;
  c.n_heads = 32;
  c.n_kv_heads = 4;
  c.head_dim = 64;
  c.ffn_dim = 5632;
  return c;
}

TEST(PlanTensorShard, SplitsHeadsFfnAndVocabularyByRank) {
  const ModelConfig c = TinyLlamaShape();
  auto r0 = PlanTensorShard(c, 0, 2), r1 = PlanTensorShard(c, 1, 2);
  ASSERT_TRUE(r0.ok() && r1.ok());
  EXPECT_EQ(r1->q_head0, 16);
  EXPECT_EQ(r1->n_q, 16);
  EXPECT_EQ(r1->kv_head0, 2);
  EXPECT_EQ(r1->n_kv, 2);
  EXPECT_EQ(r1->ffn0, 2816);
  EXPECT_EQ(r1->n_ffn, 2816);
  EXPECT_EQ(r0->n_vocab, 16001);  // the first ranks take the remainder
  EXPECT_EQ(r1->vocab0, 16001);
  EXPECT_EQ(r1->n_vocab, 16000);
}

TEST(PlanTensorShard, FewerKvHeadsThanRanksReplicatesTheOneEachRankReads) {
  const ModelConfig c = TinyLlamaShape();  // 4 KV heads, 8 query heads each
  for (int r = 0; r < 8; ++r) {
    auto s = PlanTensorShard(c, r, 8);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->n_q, 4);
    EXPECT_EQ(s->n_kv, 1);
    EXPECT_EQ(s->kv_head0, r / 2) << "rank " << r;  // query heads 4r..4r+3 read KV head r/2
  }
}

TEST(PlanTensorShard, SplitsThatDoNotDivideAreErrorsNamingTheDimension) {
  ModelConfig c = TinyLlamaShape();
  auto heads = PlanTensorShard(c, 0, 3);
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("32 attention heads"), std::string::npos);
  c.n_heads = 6;
  c.n_kv_heads = 3;
  auto kv = PlanTensorShard(c, 0, 2);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("3 KV heads"), std::string::npos);
  c = TinyLlamaShape();
  c.ffn_dim = 5633;
  EXPECT_FALSE(PlanTensorShard(c, 0, 2).ok());
  c = TinyLlamaShape();
  c.n_expert = 8;  // MoE layers split their experts at load (MoeFfn, ExpertSplit)
  EXPECT_TRUE(PlanTensorShard(c, 0, 2).ok());
}

TEST(PlanStageLayers, ContiguousRangesWithTheRemainderFirst) {
  EXPECT_EQ(PlanStageLayers(5, 0, 2).first, 0);
  EXPECT_EQ(PlanStageLayers(5, 0, 2).last, 3);
  EXPECT_EQ(PlanStageLayers(5, 1, 2).first, 3);
  EXPECT_EQ(PlanStageLayers(5, 1, 2).last, 5);
  EXPECT_EQ(PlanStageLayers(22, 3, 4).first, 17);
  EXPECT_EQ(PlanStageLayers(22, 3, 4).last, 22);
}

TEST(SliceColumns, CopiesWholeBlocksAndRefusesACutThroughOne) {
  // q8_0: 34 bytes per 32 values; 2 rows of 64 values = 2 blocks each, bytes numbered.
  const size_t row = RowBytes(DType::kQ8_0, 64);
  std::vector<uint8_t> bytes(2 * row);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  Linear w{bytes.data(), DType::kQ8_0, 2, 64, bytes.size(), nullptr, nullptr, 0.f};
  std::vector<std::shared_ptr<AlignedBuffer>> keep;
  auto cut = SliceColumns(w, 16, 32, "blk.0.ffn_down.weight", keep);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("blk.0.ffn_down.weight"), std::string::npos);
  EXPECT_NE(cut.status().message().find("cut a quantization block"), std::string::npos);
  auto second = SliceColumns(w, 32, 32, "blk.0.ffn_down.weight", keep);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->n_in, 32);
  EXPECT_EQ(second->bytes, 2 * row / 2);
  ASSERT_EQ(keep.size(), 1u);
  const auto* got = static_cast<const uint8_t*>(second->data);
  EXPECT_EQ(0, std::memcmp(got, bytes.data() + row / 2, row / 2));                  // row 0, block 1
  EXPECT_EQ(0, std::memcmp(got + row / 2, bytes.data() + row + row / 2, row / 2));  // row 1, block 1
}

TEST(SliceRows, IsAViewOfTheRowRange) {
  std::vector<float> m(4 * 8);
  Linear w{m.data(), DType::kF32, 4, 8, m.size() * 4, nullptr, nullptr, 0.f};
  Linear s = SliceRows(w, 1, 2);
  EXPECT_EQ(s.data, m.data() + 8);
  EXPECT_EQ(s.n_out, 2);
  EXPECT_EQ(s.bytes, 2u * 8 * 4);
}

}  // namespace
}  // namespace ferry
