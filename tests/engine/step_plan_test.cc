// The messages rank 0's engine sends its follower ranks (engine/step_plan.h): the cache shape
// and a step survive encoding whole, and a damaged message is an error, not a crash; and how a
// step is cut into pipeline micro-batches.
#include "engine/step_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/micro_batches.h"

namespace ferry {
namespace {

TEST(StepPlan, CacheShapeRoundTripsEveryField) {
  for (bool rotate : {false, true}) {
    FollowerCacheShape s;
    s.num_blocks = 91;
    s.block_size = 16;
    s.n_slots = 5;
    s.max_seq_len = 2048;
    s.kv_types = KvCacheTypes{DType::kQ4_0, DType::kQ8_0, rotate};
    s.kv_groups = 13;  // gemma3-1b's sliding and full groups of 2 layers
    s.layers_per_group = 2;
    std::vector<int32_t> words;
    EncodeCacheShape(s, &words);
    auto back = DecodeCacheShape(words);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->num_blocks, 91);
    EXPECT_EQ(back->block_size, 16);
    EXPECT_EQ(back->n_slots, 5);
    EXPECT_EQ(back->max_seq_len, 2048);
    EXPECT_EQ(back->kv_types, s.kv_types) << "rotate " << rotate;  // --cache-rotate included
    EXPECT_EQ(back->kv_groups, 13);
    EXPECT_EQ(back->layers_per_group, 2);
    std::vector<int32_t> no_groups = words;
    no_groups[7] = 0;
    EXPECT_FALSE(DecodeCacheShape(no_groups).ok());
    words.pop_back();
    EXPECT_FALSE(DecodeCacheShape(words).ok());
  }
}

TEST(StepPlan, StepRoundTripsAndADamagedOneIsAnError) {
  StepPlan p;
  p.block_copies = {{3, 7}, {1, 2}};
  p.num_groups = 2;  // two slots, a full and a sliding table each (-2: a block out of the window)
  p.block_tables = {{4, 5, 6}, {-2, 8, 10}, {}, {9}};
  p.batch.Add(11, 0, 0, false);
  p.batch.Add(12, 1, 0, true, 1);  // greedy: the argmax only
  p.batch.Add(13, 5, 2, true);     // the whole row
  p.hidden = true;
  p.micro_batch_cuts = {0, 2, 3};  // two pipeline micro-batches
  std::vector<int32_t> words;
  EncodeStepPlan(p, &words);
  StepPlan q;
  ASSERT_TRUE(DecodeStepPlan(words, &q).ok());
  EXPECT_EQ(q.block_copies, p.block_copies);
  EXPECT_EQ(q.num_groups, 2);
  EXPECT_EQ(q.block_tables, p.block_tables);
  EXPECT_EQ(q.batch.tokens, p.batch.tokens);
  EXPECT_EQ(q.batch.positions, p.batch.positions);
  EXPECT_EQ(q.batch.seq_ids, p.batch.seq_ids);
  EXPECT_EQ(q.batch.want_logits, p.batch.want_logits);
  EXPECT_EQ(q.batch.logits_top_k, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_TRUE(q.hidden);
  EXPECT_EQ(q.micro_batch_cuts, p.micro_batch_cuts);
  for (size_t cut = 0; cut < words.size(); ++cut) {  // every truncation
    std::vector<int32_t> w(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_FALSE(DecodeStepPlan(w, &q).ok()) << cut;
  }
  std::vector<int32_t> ragged = words;
  ragged[5] = 3;  // three groups: four tables are not whole slots
  EXPECT_FALSE(DecodeStepPlan(ragged, &q).ok());
  std::vector<int32_t> huge = words;
  huge[0] = 1 << 30;  // a count far beyond the words left
  EXPECT_FALSE(DecodeStepPlan(huge, &q).ok());
  std::vector<int32_t> negative = words;
  negative[negative.size() - 6] = -1;  // the last token's top-k (the hidden flag and cuts follow)
  EXPECT_FALSE(DecodeStepPlan(negative, &q).ok());
  // Cuts that do not run from 0 to the batch's 3 tokens in order, or fewer than two.
  for (const std::vector<int32_t>& cuts :
       std::vector<std::vector<int32_t>>{{1, 2, 3}, {0, 2, 4}, {0, 3, 2}, {0}}) {
    StepPlan bad = p;
    bad.micro_batch_cuts = cuts;
    EncodeStepPlan(bad, &words);
    EXPECT_FALSE(DecodeStepPlan(words, &q).ok()) << cuts.size();
  }
}

TEST(MicroBatches, CutEvenRangesOfAtLeastTheMinimumOnlyUnderPipelineStages) {
  const MicroBatchConfig c{.min_tokens = 16, .max_count = 8};
  EXPECT_EQ(PlanMicroBatches(100, 1, c), (std::vector<int32_t>{0, 100}));  // no stages: nothing to overlap
  EXPECT_EQ(PlanMicroBatches(100, 2, c), (std::vector<int32_t>{0, 17, 34, 51, 68, 84, 100}));
  EXPECT_EQ(PlanMicroBatches(31, 2, c), (std::vector<int32_t>{0, 31}));  // two would be under 16 each
  EXPECT_EQ(PlanMicroBatches(4, 4, c), (std::vector<int32_t>{0, 4}));    // a decode step
  EXPECT_EQ(PlanMicroBatches(1000, 2, c).size(), 9u);                    // at most 8
  EXPECT_EQ(PlanMicroBatches(0, 2, c), (std::vector<int32_t>{0, 0}));
  const MicroBatchConfig one{.min_tokens = 1, .max_count = 1};
  EXPECT_EQ(PlanMicroBatches(100, 2, one), (std::vector<int32_t>{0, 100}));
}

}  // namespace
}  // namespace ferry
