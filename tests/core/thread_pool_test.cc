#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace ferry {
namespace {

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 50; ++rep) {
        pool.ParallelFor(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      }
      for (auto& h : hits) EXPECT_EQ(h.load(), 50);
    }
  }
}

TEST(ThreadPool, RunUsesEveryThread) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.Run([&](int t, int nt) {
    EXPECT_EQ(nt, 4);
    seen[static_cast<size_t>(t)]++;
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPool, PhysicalCoresPositive) { EXPECT_GE(PhysicalCores(), 1); }

}  // namespace
}  // namespace ferry
