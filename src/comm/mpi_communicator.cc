#include "comm/mpi_communicator.h"

#include <mpi.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/timer.h"

namespace ferry::comm {
namespace {

std::string MpiErrorText(int err) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

constexpr double kSpinSeconds = 50e-6;  // busy-wait this long before sleeping between polls

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owns_world, double timeout_s)
      : comm_(comm), owns_world_(owns_world), timeout_s_(timeout_s) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    if (owns_world_) {
      MPI_Finalize();
    } else {
      MPI_Comm_free(&comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceSum(float* data, size_t n) override {
    // Gather every rank's partial, then add them in rank order here: the same order (and so the
    // same bits) on every rank, which MPI_Allreduce does not promise.
    gathered_.resize(n * static_cast<size_t>(size_));  // [size, n]
    FERRY_RETURN_IF_ERROR(AllGather(data, n * sizeof(float), gathered_.data()));
    std::copy_n(gathered_.data(), n, data);
    for (int r = 1; r < size_; ++r) {
      const float* part = gathered_.data() + static_cast<size_t>(r) * n;
      for (size_t i = 0; i < n; ++i) data[i] += part[i];
    }
    return Status::Ok();
  }

  Status AllGather(const void* send, size_t n, void* recv) override {
    MPI_Request req;
    const int count = static_cast<int>(n);
    return Finish(MPI_Iallgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm_, &req), &req, n,
                  "all-gather");
  }

  Status AllGatherV(const void* send, const std::vector<size_t>& counts, void* recv) override {
    if (counts.size() != static_cast<size_t>(size_))
      return InvalidArgumentError("all-gather: {} counts for a group of {}", counts.size(), size_);
    std::vector<int> c(counts.size()), displs(counts.size());
    int off = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      c[r] = static_cast<int>(counts[r]);
      displs[r] = off;
      off += c[r];
    }
    MPI_Request req;
    return Finish(MPI_Iallgatherv(send, c[static_cast<size_t>(rank_)], MPI_BYTE, recv, c.data(),
                                  displs.data(), MPI_BYTE, comm_, &req),
                  &req, counts[static_cast<size_t>(rank_)], "all-gather");
  }

  Status Send(const void* data, size_t n, int dest, int tag) override {
    MPI_Request req;
    return Finish(MPI_Isend(data, static_cast<int>(n), MPI_BYTE, dest, tag, comm_, &req), &req, n, "send");
  }

  Status Recv(void* data, size_t n, int src, int tag) override {
    MPI_Request req;
    return Finish(MPI_Irecv(data, static_cast<int>(n), MPI_BYTE, src, tag, comm_, &req), &req, 0, "receive");
  }

  Status Broadcast(void* data, size_t n, int root) override {
    MPI_Request req;
    return Finish(MPI_Ibcast(data, static_cast<int>(n), MPI_BYTE, root, comm_, &req), &req,
                  rank_ == root ? n : 0, "broadcast");
  }

  Status Barrier() override {
    MPI_Request req;
    return Finish(MPI_Ibarrier(comm_, &req), &req, 0, "barrier");
  }

  StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    MPI_Comm sub;
    if (int err = MPI_Comm_split(comm_, color, key, &sub); err != MPI_SUCCESS)
      return IoError("splitting the communicator failed: {}", MpiErrorText(err));
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(sub, false, timeout_s_));
  }

 private:
  // Waits for a started request until the deadline: polling MPI_Test lets a dead or stopped
  // peer become an error instead of a hang (a blocking call would wait forever).
  Status Finish(int start_err, MPI_Request* req, size_t bytes_sent, const char* what) {
    Timer t;
    ++stats_.calls;
    stats_.bytes += bytes_sent;
    if (start_err != MPI_SUCCESS) return IoError("{} failed: {}", what, MpiErrorText(start_err));
    for (int spins = 0;; ++spins) {
      int done = 0;
      if (int err = MPI_Test(req, &done, MPI_STATUS_IGNORE); err != MPI_SUCCESS) {
        stats_.seconds += t.Seconds();
        return IoError("{} failed: {} (a rank has died or lost its link)", what, MpiErrorText(err));
      }
      if (done) break;
      if ((spins & 255) == 255) {
        const double waited = t.Seconds();
        if (waited > timeout_s_) {
          stats_.seconds += waited;
          // The caller adds which rank this is (the CLI's messages all start with it).
          return IoError(
              "{} did not complete within {:g} s (--comm-timeout): a rank has died, stopped or lost "
              "its link",
              what, timeout_s_);
        }
        // Spin briefly, then sleep between polls: a waiting rank must not hold a core its peer
        // (or anything else on a shared machine) needs, and a yield does not give it away on
        // Linux's scheduler; a short sleep does, for a wake-up cost of tens of microseconds.
        if (waited > kSpinSeconds) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    stats_.seconds += t.Seconds();
    return Status::Ok();
  }

  MPI_Comm comm_;
  bool owns_world_;
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  std::vector<float> gathered_;  // AllReduceSum's [size, n] partials
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> OpenMpiWorld(double timeout_s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return InternalError("MPI is already initialized: open the world once per process");
  int provided = 0;
  if (int err = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided); err != MPI_SUCCESS)
    return IoError("MPI_Init failed: {}", MpiErrorText(err));
  // Polls sleep 20 us (Finish): without this the kernel may stretch each by its default 50 us slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // 1 us, for this (the calling) thread; a hint
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, true, timeout_s));
}

void AbortMpi(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace ferry::comm
