// MpiCommunicator semantics, run by ctest under mpirun with 3 ranks (an odd count, so sums of
// three partials show their order). Every rank runs every test; a failure on any rank fails
// the job. Built only with MPI.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.h"

namespace ferry::comm {
namespace {

Communicator* g_world = nullptr;

// The values rank r contributes at index i: large and small terms, so that float addition in
// another order than 0, 1, 2 gives other bits.
float Partial(int r, size_t i) {
  const float big = 1e8f * static_cast<float>(i + 1);
  if (r == 0) return 1.0f + static_cast<float>(i);  // lost in (small + big) - big, kept in reverse
  if (r == 1) return big;
  if (r == 2) return -big;
  return 0.25f * static_cast<float>(r);
}

TEST(MpiCommunicator, WorldMatchesTheLauncher) {
  EXPECT_EQ(g_world->size(), LauncherWorldSize());
  EXPECT_GE(g_world->size(), 2);
}

TEST(MpiCommunicator, AllReduceSumsInRankOrderWithTheSameBitsOnEveryRank) {
  const int n_ranks = g_world->size();
  const size_t n = 5;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = Partial(g_world->rank(), i);
  ASSERT_TRUE(g_world->AllReduceSum(x.data(), n).ok());
  for (size_t i = 0; i < n; ++i) {
    float want = Partial(0, i);
    for (int r = 1; r < n_ranks; ++r) want += Partial(r, i);
    uint32_t got_bits, want_bits;
    std::memcpy(&got_bits, &x[i], 4);
    std::memcpy(&want_bits, &want, 4);
    EXPECT_EQ(got_bits, want_bits) << "index " << i << ": " << x[i] << " vs " << want;
  }
  std::vector<float> all(n * static_cast<size_t>(n_ranks));
  ASSERT_TRUE(g_world->AllGather(x.data(), n * sizeof(float), all.data()).ok());
  for (int r = 1; r < n_ranks; ++r)
    EXPECT_EQ(0, std::memcmp(all.data(), all.data() + static_cast<size_t>(r) * n, n * sizeof(float)));
}

TEST(MpiCommunicator, AllGatherPlacesEachRankInOrder) {
  const int me = g_world->rank(), n_ranks = g_world->size();
  std::vector<int32_t> mine = {me * 10, me * 10 + 1};
  std::vector<int32_t> all(2 * static_cast<size_t>(n_ranks));
  ASSERT_TRUE(g_world->AllGather(mine.data(), 8, all.data()).ok());
  for (int r = 0; r < n_ranks; ++r) {
    EXPECT_EQ(all[2 * r], r * 10);
    EXPECT_EQ(all[2 * r + 1], r * 10 + 1);
  }
  // Uneven: rank r sends r + 1 bytes of value 'a' + r.
  std::vector<size_t> counts;
  std::string want;
  for (int r = 0; r < n_ranks; ++r) {
    counts.push_back(static_cast<size_t>(r) + 1);
    want += std::string(static_cast<size_t>(r) + 1, static_cast<char>('a' + r));
  }
  std::string send(static_cast<size_t>(me) + 1, static_cast<char>('a' + me)), got(want.size(), '?');
  ASSERT_TRUE(g_world->AllGatherV(send.data(), counts, got.data()).ok());
  EXPECT_EQ(got, want);
  EXPECT_FALSE(g_world->AllGatherV(send.data(), {1}, got.data()).ok());
}

TEST(MpiCommunicator, SendRecvAroundARing) {
  const int me = g_world->rank(), n_ranks = g_world->size();
  const int next = (me + 1) % n_ranks, prev = (me + n_ranks - 1) % n_ranks;
  int32_t out = 1000 + me, in = -1;
  if (me % 2 == 0) {
    ASSERT_TRUE(g_world->Send(&out, 4, next, 7).ok());
    ASSERT_TRUE(g_world->Recv(&in, 4, prev, 7).ok());
  } else {
    ASSERT_TRUE(g_world->Recv(&in, 4, prev, 7).ok());
    ASSERT_TRUE(g_world->Send(&out, 4, next, 7).ok());
  }
  EXPECT_EQ(in, 1000 + prev);
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsBytes) {
  char buf[6] = "none";
  if (g_world->rank() == 1) std::memcpy(buf, "root1", 6);
  ASSERT_TRUE(g_world->Broadcast(buf, 6, 1).ok());
  EXPECT_STREQ(buf, "root1");
  ASSERT_TRUE(g_world->Barrier().ok());
}

TEST(MpiCommunicator, SplitMakesGroupsOrderedByKey) {
  const int me = g_world->rank();
  // color = parity; key reversed, so the highest old rank becomes rank 0 of its group.
  auto sub = g_world->Split(me % 2, -me);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  int want_size = 0, want_rank = 0;
  for (int r = 0; r < g_world->size(); ++r)
    if (r % 2 == me % 2) {
      ++want_size;
      if (r > me) ++want_rank;
    }
  EXPECT_EQ((*sub)->size(), want_size);
  EXPECT_EQ((*sub)->rank(), want_rank);
  float x = static_cast<float>(me);
  ASSERT_TRUE((*sub)->AllReduceSum(&x, 1).ok());
  float want = 0;
  for (int r = 0; r < g_world->size(); ++r)
    if (r % 2 == me % 2) want += static_cast<float>(r);
  EXPECT_EQ(x, want);
  EXPECT_GT((*sub)->stats().calls, 0u);
}

// Run on its own with --rank0-timeout=1 (the other ranks keep a long one, so only rank 0's wait
// can expire): rank 0 waits for a message rank 1 sends only after rank 0 gave up; the wait must
// fail with the timeout named instead of blocking.
TEST(MpiCommunicatorTimeout, AWaitPastTheDeadlineIsAnErrorNotAHang) {
  const int me = g_world->rank();
  int32_t v = 0;
  if (me == 0) {
    Status s = g_world->Recv(&v, 4, 1, 99);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("did not complete within 1 s (--comm-timeout)"), std::string::npos)
        << s.message();
  }
  ASSERT_TRUE(g_world->Barrier().ok());
  if (me == 1) {
    ASSERT_TRUE(g_world->Send(&v, 4, 0, 99).ok());  // completes rank 0's dropped receive
  }
  ASSERT_TRUE(g_world->Barrier().ok());
}

}  // namespace
}  // namespace ferry::comm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  double timeout = 30;
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const bool rank0 = !rank_env || std::atoi(rank_env) == 0;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--rank0-timeout=", 16) == 0 && rank0) timeout = std::atof(argv[i] + 16);
  auto world = ferry::comm::OpenWorld({.timeout_s = timeout});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  if ((*world)->rank() != 0) ::testing::GTEST_FLAG(print_time) = false;
  ferry::comm::g_world = world->get();
  const int rc = RUN_ALL_TESTS();
  world->reset();
  return rc;
}
