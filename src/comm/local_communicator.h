// LocalCommunicator: the group of one rank (a process on its own). Reductions and broadcasts
// leave the data as it is, gathers copy; point-to-point calls are errors (there is no peer).
#pragma once

#include "comm/communicator.h"

namespace ferry::comm {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllReduceSum(float* data, size_t n) override;
  Status AllGather(const void* send, size_t n, void* recv) override;
  Status AllGatherV(const void* send, const std::vector<size_t>& counts, void* recv) override;
  Status Send(const void* data, size_t n, int dest, int tag) override;
  Status Recv(void* data, size_t n, int src, int tag) override;
  Status Broadcast(void* data, size_t n, int root) override;
  Status Barrier() override;
  StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
};

}  // namespace ferry::comm
