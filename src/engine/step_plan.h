// StepPlan: what rank 0's engine tells the other ranks of a split model about one step, as
// xFasterTransformer does: the block copies, each batch slot's block table and the flat batch
// (token ids, positions, slots, which logits are wanted and how many of each row's largest).
// Everything else (scheduling, the block manager, sampling) stays on rank 0; the followers run
// the same forward on their shard of the weights and of the paged KV cache (engine/follower.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/forward_batch.h"
#include "model/kv_storage.h"

namespace ferry {

// The paged cache the followers allocate, as rank 0 sized it (--kv-cache-memory may be a
// fraction of free memory, which differs between machines: rank 0's count is the one).
struct FollowerCacheShape {
  int32_t num_blocks = 0, block_size = 0;
  int32_t n_slots = 0;  // sequences one step can hold (--max-num-seqs)
  int32_t max_seq_len = 0;
  KvCacheTypes kv_types;
  // Rank 0's KV groups (model/kv_group_layout.h): 1, or the groups KvGroupLayout::ForModel
  // makes of the model's sliding and full layers, which each follower builds from its own
  // config and must find the same (number of groups and layers per group, before each
  // pipeline stage keeps only its own layers: KvGroupLayout::ForStage).
  int32_t kv_groups = 1, layers_per_group = 0;
};

struct StepPlan {
  std::vector<std::pair<int32_t, int32_t>> block_copies;  // (src, dst) copy-on-write, before the pass
  int32_t num_groups = 1;                                 // KV groups: a table per slot and group
  std::vector<std::vector<int32_t>> block_tables;         // [slot * num_groups + group][logical block]
  ForwardBatch batch;
  bool hidden = false;  // the pass returns final hidden states too (a request pools embeddings)
  // Pipeline stages: the batch's micro-batches as token offsets [count + 1] (engine/
  // micro_batches.h), so every rank cuts it alike; {0, n} (one) otherwise.
  std::vector<int32_t> micro_batch_cuts;
};

// Messages are int32 words (the counts first, then the arrays).
void EncodeCacheShape(const FollowerCacheShape& shape, std::vector<int32_t>* words);
StatusOr<FollowerCacheShape> DecodeCacheShape(const std::vector<int32_t>& words);
void EncodeStepPlan(const StepPlan& plan, std::vector<int32_t>* words);
// Checks every count against the words left, so a damaged message is an error, not a crash.
Status DecodeStepPlan(const std::vector<int32_t>& words, StepPlan* plan);

}  // namespace ferry
