#include "core/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace ferry {
namespace {

// Spin-wait hint (x86 `pause`, Arm `yield`): keeps a spinning thread from starving its sibling
// hyperthread and the memory pipeline.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// Spins before blocking, for the join and for an idle worker: about 50 us (a pause is ~24 ns
// on Zen 5), longer than a decode-sized op's imbalance or the serial work between two ops.
// Not longer: when processes outnumber cores, a spinning thread holds the core its peer needs
// to finish; two 2-thread perplexity runs on 2 cores took 84 s each with 20000 spins and 20 s
// with 2000, while a quiet machine's decode tok/s stayed within noise.
constexpr int kJoinSpins = 2000;

}  // namespace

int PhysicalCores() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto value = [&]() { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : PhysicalCores()) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::Run(TaskRef task) {
  if (n_threads_ == 1) {
    task(0, 1);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &task;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  task(0, n_threads_);
  // Workers finish in microseconds for decode-sized ops: spin first, then block on the counter.
  // Never sched_yield: on a loaded machine it hands the core to any runnable process for a
  // whole time slice (milliseconds), and a decode step waits here ~150 times.
  for (int spins = 0; spins < kJoinSpins; ++spins) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    CpuRelax();
  }
  for (int left; (left = pending_.load(std::memory_order_acquire)) != 0;)
    pending_.wait(left, std::memory_order_acquire);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly on the generation counter (cheap wake-up for back-to-back ops), then sleep.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spins = 0; gen == seen && spins < kJoinSpins; ++spins) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    const TaskRef* task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      task = task_;
    }
    (*task)(index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace ferry
