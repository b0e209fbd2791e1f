// The serving engine over a model split across MPI ranks (docs/scaling.md): rank 0 runs the
// whole engine (scheduler, block manager, sampling, the HTTP server) and, through a
// StepLeader, sends each step's StepPlan to the other ranks, which run RunFollower: the same
// forward on their shard of the weights and of the paged KV cache, nothing else.
//
// Every message is two collectives over the world: an all-gather of an 8-byte header (so rank
// 0 learns within --comm-timeout that a follower stopped answering, even when idle) and, when
// it has words, a broadcast of them. An idle rank 0 sends a heartbeat every heartbeat_s, since
// a follower waits for the next message only as long as the world's timeout.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/timer.h"
#include "comm/communicator.h"
#include "engine/step_plan.h"
#include "model/model.h"

namespace ferry {

class StepLeader {
 public:
  // `world` (rank 0 of it is this process) must outlive the leader.
  StepLeader(comm::Communicator& world, double heartbeat_s) : world_(world), heartbeat_s_(heartbeat_s) {}
  ~StepLeader();  // tells the followers to return (unless the link has failed)
  StepLeader(const StepLeader&) = delete;
  StepLeader& operator=(const StepLeader&) = delete;

  // The followers allocate their KV shard in this shape; block_bytes: one block's K/V bytes on
  // rank 0 (PagedKvCache::BlockContentBytes), gathered with the followers' own.
  Status Start(const FollowerCacheShape& shape, uint64_t block_bytes);
  // Before rank 0's forward of the step: the followers run theirs with it.
  Status Step(const StepPlan& plan);
  // A heartbeat when rank 0 has sent nothing for heartbeat_s (call it whenever idle).
  Status KeepAlive();

  // The prefix cache's tiers (on rank 0) keep whole blocks: every rank's share of a block's K/V
  // bytes, rank 0's first. After Start: the bytes of one block on the followers, ranks 1, 2, ...
  // in order (each follower's PagedKvCache::BlockContentBytes, gathered at Start).
  size_t FollowerBlockBytes() const { return follower_block_bytes_; }
  // Block `block`'s bytes on the followers -> out: [FollowerBlockBytes()], in rank order.
  Status ReadBlock(int32_t block, uint8_t* out);
  // in: [FollowerBlockBytes()] -> each follower's share written into its block `block`.
  Status WriteBlock(int32_t block, const uint8_t* in);
  double heartbeat_s() const { return heartbeat_s_; }

 private:
  Status Send(int32_t kind);  // words_ after the header
  Status Fail(Status st);     // marks the link failed and returns st
  // Sends a block message of `kind`, then transfer(rank, bytes) for each follower in rank order.
  template <typename Transfer>
  Status TransferBlock(int32_t kind, int32_t block, Transfer&& transfer);

  comm::Communicator& world_;
  double heartbeat_s_;
  Timer since_send_;
  bool failed_ = false;                // a send failed: the followers are gone or out of step
  std::vector<int32_t> words_;         // the message being sent
  std::vector<uint64_t> block_bytes_;  // [ranks] each rank's bytes of one KV block (from Start)
  size_t follower_block_bytes_ = 0;    // the sum over ranks 1..
};

// A follower's loop: runs rank 0's steps until rank 0's StepLeader is destroyed (Ok), or fails
// when rank 0 is silent longer than the world's timeout (it died, stopped or lost its link) or
// a step fails. `threads`: this rank's thread pool (0: physical cores).
Status RunFollower(const Model& model, comm::Communicator& world, int32_t threads);

}  // namespace ferry
