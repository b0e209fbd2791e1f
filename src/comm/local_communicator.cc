#include "comm/local_communicator.h"

#include <cstring>

namespace ferry::comm {

Status LocalCommunicator::AllReduceSum(float*, size_t) {
  return Status::Ok();
}

Status LocalCommunicator::AllGather(const void* send, size_t n, void* recv) {
  if (n > 0 && send != recv) std::memmove(recv, send, n);
  return Status::Ok();
}

Status LocalCommunicator::AllGatherV(const void* send, const std::vector<size_t>& counts, void* recv) {
  if (counts.size() != 1)
    return InvalidArgumentError("all-gather: {} counts for a group of 1", counts.size());
  return AllGather(send, counts[0], recv);
}

Status LocalCommunicator::Send(const void*, size_t, int dest, int) {
  return InvalidArgumentError("send to rank {}: a single process has no other rank", dest);
}

Status LocalCommunicator::Recv(void*, size_t, int src, int) {
  return InvalidArgumentError("receive from rank {}: a single process has no other rank", src);
}

Status LocalCommunicator::Broadcast(void*, size_t, int root) {
  if (root != 0) return InvalidArgumentError("broadcast from rank {} in a group of 1", root);
  return Status::Ok();
}

Status LocalCommunicator::Barrier() {
  return Status::Ok();
}

StatusOr<std::unique_ptr<Communicator>> LocalCommunicator::Split(int, int) {
  return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>());
}

}  // namespace ferry::comm
