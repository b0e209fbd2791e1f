// ThreadPool: persistent workers for data-parallel kernels. No thread is created per op;
// a dispatch costs one atomic generation bump, and the caller thread works too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry {

// Non-owning callable reference (no allocation per dispatch).
class TaskRef {
 public:
  template <typename F>
  TaskRef(const F& f)  // NOLINT: implicit by design
      : obj_(&f), call_([](const void* o, int thread, int n_threads) {
          (*static_cast<const F*>(o))(thread, n_threads);
        }) {}
  void operator()(int thread, int n_threads) const { call_(obj_, thread, n_threads); }

 private:
  const void* obj_;
  void (*call_)(const void*, int, int);
};

class ThreadPool {
 public:
  // n_threads includes the calling thread; 0 means PhysicalCores().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs task(thread, n_threads) once on each of the n_threads threads and waits for all.
  void Run(TaskRef task);

  // Splits [0, n) into contiguous ranges, one per thread (static partition, so the split
  // depends only on n and the thread count: reductions stay deterministic).
  template <typename F>
  void ParallelFor(int64_t n, const F& f) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n == 1) {
      f(int64_t{0}, n);
      return;
    }
    Run([&](int t, int nt) {
      int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) f(begin, end);
    });
  }

 private:
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  const TaskRef* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

// Physical cores (hyperthreads not counted), at least 1.
int PhysicalCores();

}  // namespace ferry
