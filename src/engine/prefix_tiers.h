// The engine's side of the prefix cache's RAM and disk tiers (kv/tiered_block_store.h): the
// block bytes they keep come from and go back to the PagedKvCache, their fingerprint names
// the model and KV layout, and at start-up the engine prices a disk read against recomputing
// a block so the disk tier keeps only blocks that are cheaper to read than to recompute.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "core/thread_pool.h"
#include "engine/follower.h"
#include "kv/block_content.h"
#include "kv/tiered_block_store.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"

namespace ferry {

// kv::BlockContent over the paged cache's tensors.
class PagedBlockContent final : public kv::BlockContent {
 public:
  explicit PagedBlockContent(PagedKvCache& cache) : cache_(cache) {}
  size_t BlockBytes() const override { return cache_.BlockContentBytes(); }
  Status Read(kv::BlockId block, uint8_t* out) const override {
    cache_.ReadBlock(block, out);
    return Status::Ok();
  }
  Status Write(kv::BlockId block, const uint8_t* in) override {
    cache_.WriteBlock(block, in);
    return Status::Ok();
  }

 private:
  PagedKvCache& cache_;
};

// kv::BlockContent of a model split over MPI ranks, on rank 0: a block's bytes are rank 0's
// share (its PagedKvCache) followed by each follower's, read and written through the StepLeader
// (one message and one transfer per follower and block), so the tiers on rank 0 hold and
// restore whole blocks and the followers keep no tier of their own.
class SplitBlockContent final : public kv::BlockContent {
 public:
  SplitBlockContent(PagedKvCache& cache, StepLeader& leader) : own_(cache), leader_(leader) {}
  size_t BlockBytes() const override { return own_.BlockBytes() + leader_.FollowerBlockBytes(); }
  Status Read(kv::BlockId block, uint8_t* out) const override;
  Status Write(kv::BlockId block, const uint8_t* in) override;

 private:
  PagedBlockContent own_;
  StepLeader& leader_;
};

// What a stored block's bytes mean: the model file's fingerprint mixed with the shape and KV
// types of the cache and the block size (any of them different: other bytes, never a hit).
// `ranks` and `stages`: the split over MPI ranks (1, 1 in one process), whose blocks hold every
// rank's share in rank order.
uint64_t PrefixTierFingerprint(uint64_t model_fingerprint, const ModelConfig& mc, const KvCacheTypes& types,
                               int32_t block_size, size_t block_bytes, int32_t ranks, int32_t stages);

// Measures, once at start-up, the seconds to read one block's file back from `dir` (written,
// dropped from the page cache, read and verified) and to recompute a block at chain depth 0 and
// at a later depth, with forward passes through `cache` (its blocks must all be free: the
// probe writes into them), and the share of that recompute one block's layers stand for. `leader`: over split ranks, the followers run every probe pass too
// (null in one process). `block_bytes`: what one tier file holds (every rank's share).
StatusOr<kv::DiskCostModel> MeasureDiskCost(const Model& model, PagedKvCache& cache, ThreadPool* pool,
                                            StepLeader* leader, size_t block_bytes, const std::string& dir,
                                            int32_t max_seq_len);

}  // namespace ferry
