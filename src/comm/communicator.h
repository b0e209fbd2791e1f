// Communicator: what a model split over processes needs from the transport — collectives over
// f32 buffers and bytes among a fixed group of ranks. LocalCommunicator is the one-rank group
// (every call a copy or nothing); MpiCommunicator (built when CMake finds MPI) runs them over
// Open MPI. Every call is collective over the group unless it says otherwise, and fails with a
// Status (never hangs past the group's timeout) when a peer is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"

namespace ferry::comm {

// What the calls of one communicator cost so far (for `comm_s` in `ferry bench`).
struct CommStats {
  double seconds = 0;  // wall time inside calls, waiting included
  uint64_t bytes = 0;  // payload bytes this rank sent
  uint64_t calls = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data: [n] on every rank -> the element-wise sum over ranks, added in rank order
  // 0, 1, ..., size-1 on every rank, so every rank gets the same bits and a layout gives the
  // same result run after run.
  virtual Status AllReduceSum(float* data, size_t n) = 0;
  // send: [n] bytes from every rank -> recv: [size * n] bytes, rank r's at r * n.
  virtual Status AllGather(const void* send, size_t n, void* recv) = 0;
  // send: [counts[rank]] bytes -> recv: [sum of counts] bytes, rank r's after ranks < r.
  virtual Status AllGatherV(const void* send, const std::vector<size_t>& counts, void* recv) = 0;
  // Point to point (not collective): n bytes to / from one rank of the group, matched by tag.
  virtual Status Send(const void* data, size_t n, int dest, int tag) = 0;
  virtual Status Recv(void* data, size_t n, int src, int tag) = 0;
  // data: [n] bytes, root's copy to every rank.
  virtual Status Broadcast(void* data, size_t n, int root) = 0;
  virtual Status Barrier() = 0;
  // The ranks passing the same color form one new group, ordered by key (then old rank).
  virtual StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) = 0;

  const CommStats& stats() const { return stats_; }

 protected:
  CommStats stats_;
};

}  // namespace ferry::comm
