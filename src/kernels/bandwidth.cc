// Memory read-bandwidth probe for `ferry bench`: every thread streams its own slice of one big
// buffer with the active ISA's summing loop (AVX2: four 256-bit loads per iteration).
#include <algorithm>
#include <chrono>
#include <vector>

#include "base/aligned_buffer.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {

double MeasureReadBandwidth(size_t bytes, int reps, ThreadPool* pool) {
  const int n_threads = pool ? pool->size() : 1;
  // Whole 4 KiB pages per thread slice.
  const int64_t page_floats = 1024;
  const int64_t floats = static_cast<int64_t>(bytes / 4) / (page_floats * n_threads) * (page_floats * n_threads);
  if (floats <= 0) return 0.0;
  AlignedBuffer buf(static_cast<size_t>(floats) * 4);
  float* x = buf.as<float>();
  const internal::KernelTable& tab = internal::Table();
  std::vector<double> sink(static_cast<size_t>(n_threads) * 8, 0.0);  // one cache line per thread
  auto run = [&](auto&& body) {
    if (pool && n_threads > 1) {
      pool->Run([&](int t, int nt) { body(floats * t / nt, floats * (t + 1) / nt, t); });
    } else {
      body(0, floats, 0);
    }
  };
  // First touch by the thread that will read the slice (pages land on its NUMA node).
  run([&](int64_t b, int64_t e, int) { std::fill(x + b, x + e, 1.0f); });
  double best = 0.0;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run([&](int64_t b, int64_t e, int t) { sink[static_cast<size_t>(t) * 8] += tab.read_sum(x + b, e - b); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(floats) * 4.0 / s);
  }
  volatile double keep = sink[0];
  (void)keep;
  return best;
}

}  // namespace ferry::kernels
