#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

// Feeds pieces one by one, returns everything emitted.
std::string FeedAll(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    out += m.Push(p);
    if (m.stopped()) return out;
  }
  return out + m.Flush();
}

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(FeedAll(m, {"a", "bc", ""}), "abc");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopInsideOnePiece) {
  StopMatcher m({"END"});
  EXPECT_EQ(FeedAll(m, {"hello END world"}), "hello ");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, StopSplitAcrossPiecesNeverPartlyEmitted) {
  StopMatcher m({"\nUser:"});
  std::string emitted;
  for (const char* p : {"Hi", " there", "\n", "Us", "er", ":", " more"}) {
    std::string out = m.Push(p);
    EXPECT_EQ(out.find('\n'), std::string::npos) << "emitted part of the stop string";
    emitted += out;
    if (m.stopped()) break;
  }
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(emitted, "Hi there");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.Push("xab"), "x");
  EXPECT_EQ(m.Push("d"), "abd");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralStops) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(FeedAll(m, {"hello world"}), "hel");
}

TEST(StopMatcher, HeldTextFlushedAtEnd) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("text ST"), "text ");
  EXPECT_EQ(m.Flush(), "ST");
}

}  // namespace
}  // namespace ferry
