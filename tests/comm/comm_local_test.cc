// LocalCommunicator: a group of one, where collectives are copies or nothing.
#include <gtest/gtest.h>

#include <vector>

#include "comm/local_communicator.h"
#include "comm/world.h"

namespace ferry::comm {
namespace {

TEST(LocalCommunicator, CollectivesOfOneRankKeepOrCopyTheData) {
  LocalCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  std::vector<float> x = {1.5f, -2.f, 3.25f};
  ASSERT_TRUE(c.AllReduceSum(x.data(), x.size()).ok());
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.f, 3.25f}));
  std::vector<char> out(3);
  ASSERT_TRUE(c.AllGather("abc", 3, out.data()).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "abc");
  std::vector<char> outv(2);
  ASSERT_TRUE(c.AllGatherV("xy", {2}, outv.data()).ok());
  EXPECT_EQ(std::string(outv.begin(), outv.end()), "xy");
  ASSERT_TRUE(c.Broadcast(x.data(), 4, 0).ok());
  ASSERT_TRUE(c.Barrier().ok());
}

TEST(LocalCommunicator, CallsNamingAnotherRankAreErrors) {
  LocalCommunicator c;
  char b = 0;
  EXPECT_FALSE(c.Send(&b, 1, 1, 0).ok());
  EXPECT_FALSE(c.Recv(&b, 1, 1, 0).ok());
  EXPECT_FALSE(c.Broadcast(&b, 1, 1).ok());
  EXPECT_FALSE(c.AllGatherV(&b, {1, 1}, &b).ok());
  auto sub = c.Split(3, 0);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ((*sub)->size(), 1);
}

TEST(World, WithoutALauncherIsOneLocalRank) {
  if (LauncherWorldSize() > 1) GTEST_SKIP() << "started by mpirun";
  auto w = OpenWorld({});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->size(), 1);
  EXPECT_FALSE(OpenWorld({.timeout_s = 0}).ok());
}

}  // namespace
}  // namespace ferry::comm
