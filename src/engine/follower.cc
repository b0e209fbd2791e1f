#include "engine/follower.h"

#include <optional>

#include "base/log.h"
#include "core/thread_pool.h"
#include "engine/micro_batches.h"
#include "model/paged_kv_cache.h"

namespace ferry {
namespace {

enum MessageKind : int32_t {
  kFollowerHeader = 0,  // what the followers contribute to the header all-gather
  kStart = 1,
  kStep = 2,
  kHeartbeat = 3,
  kStop = 4,
  kReadBlock = 5,   // words: [block]; each follower sends its share of the block's bytes to rank 0
  kWriteBlock = 6,  // words: [block]; rank 0 sends each follower its share to write
};

constexpr int kBlockTag = 41;  // the point-to-point messages that carry block bytes

// After kStart: every rank's bytes of one KV block, so rank 0 knows each follower's share.
Status GatherBlockBytes(comm::Communicator& world, uint64_t own, std::vector<uint64_t>* all) {
  all->assign(static_cast<size_t>(world.size()), 0);
  return world.AllGather(&own, sizeof(own), all->data());
}

struct Header {
  int32_t kind = kFollowerHeader;
  int32_t words = 0;  // int32 words broadcast after the header
};

// One message: rank 0's header (every rank's gathered) and its words.
Status Exchange(comm::Communicator& world, Header* header, std::vector<int32_t>* words) {
  std::vector<Header> all(static_cast<size_t>(world.size()));  // [ranks]
  FERRY_RETURN_IF_ERROR(world.AllGather(header, sizeof(Header), all.data()));
  *header = all[0];
  if (header->words < 0) return InternalError("rank 0 sent a message of {} words", header->words);
  words->resize(static_cast<size_t>(header->words));
  if (header->words > 0)
    FERRY_RETURN_IF_ERROR(world.Broadcast(words->data(), words->size() * sizeof(int32_t), 0));
  return Status::Ok();
}

}  // namespace

StepLeader::~StepLeader() {
  if (failed_) return;
  words_.clear();
  if (Status st = Send(kStop); !st.ok())
    Log(LogLevel::kWarn, "stopping the follower ranks failed: {}", st.ToString());
}

Status StepLeader::Start(const FollowerCacheShape& shape, uint64_t block_bytes) {
  EncodeCacheShape(shape, &words_);
  FERRY_RETURN_IF_ERROR(Send(kStart));
  if (Status st = GatherBlockBytes(world_, block_bytes, &block_bytes_); !st.ok()) return Fail(std::move(st));
  follower_block_bytes_ = 0;
  for (size_t r = 1; r < block_bytes_.size(); ++r) follower_block_bytes_ += block_bytes_[r];
  return Status::Ok();
}

Status StepLeader::ReadBlock(int32_t block, uint8_t* out) {
  return TransferBlock(kReadBlock, block, [&](int rank, size_t n) {
    const Status st = world_.Recv(out, n, rank, kBlockTag);
    out += n;
    return st;
  });
}

Status StepLeader::WriteBlock(int32_t block, const uint8_t* in) {
  return TransferBlock(kWriteBlock, block, [&](int rank, size_t n) {
    const Status st = world_.Send(in, n, rank, kBlockTag);
    in += n;
    return st;
  });
}

template <typename Transfer>
Status StepLeader::TransferBlock(int32_t kind, int32_t block, Transfer&& transfer) {
  words_.assign(1, block);
  FERRY_RETURN_IF_ERROR(Send(kind));
  for (size_t r = 1; r < block_bytes_.size(); ++r)
    if (Status st = transfer(static_cast<int>(r), block_bytes_[r]); !st.ok()) return Fail(std::move(st));
  return Status::Ok();
}

Status StepLeader::Fail(Status st) {
  failed_ = true;
  return st;
}

Status StepLeader::Step(const StepPlan& plan) {
  EncodeStepPlan(plan, &words_);
  return Send(kStep);
}

Status StepLeader::KeepAlive() {
  if (since_send_.Seconds() < heartbeat_s_) return Status::Ok();
  words_.clear();
  return Send(kHeartbeat);
}

Status StepLeader::Send(int32_t kind) {
  if (failed_) return IoError("the follower ranks are gone (an earlier message to them failed)");
  Header h{kind, static_cast<int32_t>(words_.size())};
  Status st = Exchange(world_, &h, &words_);
  since_send_.Reset();
  return st.ok() ? st : Fail(std::move(st));
}

Status RunFollower(const Model& model, comm::Communicator& world, int32_t threads) {
  const ModelConfig& mc = model.config();
  ThreadPool pool(threads);
  std::optional<PagedKvCache> cache;  // allocated by the first kStart
  FollowerCacheShape shape;
  StepPlan plan;
  ForwardScratch scratch;
  PipelinedForward pipelined;  // rank 0's micro-batches of each step
  SparsityStats stats;
  std::vector<float> logits;  // [batch.NumLogits(), n_vocab] gathered like rank 0's, then unused
  std::vector<float> hidden;  // [batch.size(), dim] when rank 0 pools embeddings
  std::vector<int32_t> words;
  std::vector<uint8_t> block;  // [BlockContentBytes()] one block's K/V bytes on this rank
  for (;;) {
    Header h;
    FERRY_RETURN_IF_ERROR(Exchange(world, &h, &words));
    switch (h.kind) {
      case kStop:
        return Status::Ok();
      case kHeartbeat:
        continue;
      case kStart: {
        FERRY_ASSIGN_OR_RETURN(shape, DecodeCacheShape(words));
        cache.reset();
        FERRY_ASSIGN_OR_RETURN(const KvCacheTypes layout, KvCacheTypesFor(mc, shape.kv_types));
        // Rank 0's KV groups, rebuilt from this rank's config (the layer pattern is the model's).
        KvGroupLayout groups = KvGroupLayout::Single(mc.n_layers);
        if (shape.kv_groups > 1) groups = KvGroupLayout::ForModel(mc, shape.max_seq_len);
        if (groups.num_groups() != shape.kv_groups || groups.layers_per_group != shape.layers_per_group)
          return InternalError(
              "rank 0's KV cache has {} groups of {} layers; this rank's model makes {} of {} (a different "
              "model file or context length on this rank?)",
              shape.kv_groups, shape.layers_per_group, groups.num_groups(), groups.layers_per_group);
        FERRY_ASSIGN_OR_RETURN(
            PagedKvCache c,
            PagedKvCache::Create(mc.n_layers, shape.num_blocks, shape.block_size, mc.n_kv_heads, mc.head_dim,
                                 shape.n_slots, shape.max_seq_len, layout,
                                 groups.ForStage(model.stage_layers().first, model.stage_layers().last)));
        cache.emplace(std::move(c));
        std::vector<uint64_t> all;
        FERRY_RETURN_IF_ERROR(GatherBlockBytes(world, cache->BlockContentBytes(), &all));
        block.resize(cache->BlockContentBytes());
        continue;
      }
      case kReadBlock:
      case kWriteBlock: {  // the prefix cache's tiers on rank 0 take or restore this rank's share
        if (!cache) return InternalError("rank 0 sent a block operation before the KV cache's shape");
        if (words.size() != 1 || words[0] < 0 || words[0] >= shape.num_blocks)
          return InternalError("rank 0's block operation names no block of the {} here", shape.num_blocks);
        if (h.kind == kReadBlock) {
          cache->ReadBlock(words[0], block.data());
          FERRY_RETURN_IF_ERROR(world.Send(block.data(), block.size(), 0, kBlockTag));
        } else {
          FERRY_RETURN_IF_ERROR(world.Recv(block.data(), block.size(), 0, kBlockTag));
          cache->WriteBlock(words[0], block.data());
        }
        continue;
      }
      case kStep:
        break;
      default:
        return InternalError("rank 0 sent a message of unknown kind {}", h.kind);
    }
    if (!cache) return InternalError("rank 0 sent a step before the KV cache's shape");
    FERRY_RETURN_IF_ERROR(DecodeStepPlan(words, &plan));
    if (plan.num_groups != shape.kv_groups)
      return InternalError("rank 0's step has block tables for {} KV groups; the cache has {}",
                           plan.num_groups, shape.kv_groups);
    const size_t slots = plan.block_tables.size() / static_cast<size_t>(plan.num_groups);
    if (static_cast<int32_t>(slots) > shape.n_slots)
      return InternalError("rank 0's step has {} batch slots; the cache holds {}", slots, shape.n_slots);
    for (const auto& [src, dst] : plan.block_copies) {
      if (src < 0 || dst < 0 || src >= shape.num_blocks || dst >= shape.num_blocks)
        return InternalError("rank 0's block copy {} -> {} is outside the {} blocks", src, dst,
                             shape.num_blocks);
      cache->CopyBlock(src, dst);
    }
    for (size_t slot = 0; slot < slots; ++slot)
      for (int32_t g = 0; g < plan.num_groups; ++g)
        cache->SetBlockTable(
            static_cast<int32_t>(slot),
            plan.block_tables[slot * static_cast<size_t>(plan.num_groups) + static_cast<size_t>(g)], g);
    logits.resize(static_cast<size_t>(plan.batch.NumLogits()) * static_cast<size_t>(mc.n_vocab));
    ForwardOptions fo;
    fo.sparsity = &model.sparsity();
    fo.stats = &stats;
    fo.scratch = &scratch;
    if (plan.hidden) {
      hidden.resize(static_cast<size_t>(plan.batch.size()) * static_cast<size_t>(mc.dim));
      fo.hidden = hidden.data();
    }
    FERRY_RETURN_IF_ERROR(
        pipelined.Run(model, plan.batch, plan.micro_batch_cuts, *cache, logits.data(), &pool, fo));
  }
}

}  // namespace ferry
