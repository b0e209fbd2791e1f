#include "core/metadata.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

TEST(Metadata, TypedGetters) {
  Metadata md;
  md.SetInt("a.count", 5);
  md.SetFloat("a.eps", 1e-5);
  md.SetString("general.architecture", "llama");
  md.SetStringArray("tok", {"x", "y"});
  md.SetFloatArray("scores", {1.5f, -2.f});
  EXPECT_EQ(md.GetInt("a.count"), 5);
  EXPECT_FLOAT_EQ(static_cast<float>(*md.GetFloat("a.eps")), 1e-5f);
  EXPECT_DOUBLE_EQ(*md.GetFloat("a.count"), 5.0);  // ints read as floats
  EXPECT_FALSE(md.GetInt("a.eps").has_value());     // floats are not ints
  EXPECT_EQ(md.GetString("general.architecture"), "llama");
  EXPECT_FALSE(md.GetString("a.count").has_value());
  EXPECT_EQ(md.GetStringArray("tok")->size(), 2u);
  EXPECT_FALSE(md.GetStringArray("scores").has_value());
  EXPECT_EQ((*md.GetFloatArray("scores"))[1], -2.f);
  EXPECT_FALSE(md.Has("missing"));
}

TEST(Metadata, OverwriteKeepsOrder) {
  Metadata md;
  md.SetInt("b", 1);
  md.SetInt("a", 2);
  md.SetInt("b", 3);
  ASSERT_EQ(md.entries().size(), 2u);
  EXPECT_EQ(md.entries()[0].first, "b");
  EXPECT_EQ(md.GetInt("b"), 3);
}

}  // namespace
}  // namespace ferry
