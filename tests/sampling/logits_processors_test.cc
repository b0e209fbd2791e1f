#include "sampling/logits_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ferry {
namespace {

constexpr float kInf = INFINITY;

std::vector<float> Apply(const LogitsConstraints& c, std::vector<int32_t> generated) {
  std::vector<float> l = {0.f, 1.f, 2.f, 3.f, 4.f};
  ApplyLogitsConstraints(c, l.data(), 5, generated);
  return l;
}

TEST(LogitsConstraints, LogitBiasAddsAndSkipsIdsOutsideTheVocabulary) {
  LogitsConstraints c;
  c.logit_bias = {{1, 10.f}, {4, -100.f}, {7, 5.f}};
  EXPECT_EQ(Apply(c, {}), (std::vector<float>{0.f, 11.f, 2.f, 3.f, -96.f}));
}

TEST(LogitsConstraints, AllowedTokenIdsBanEveryOtherToken) {
  LogitsConstraints c;
  c.allowed_token_ids = {0, 3};
  EXPECT_EQ(Apply(c, {}), (std::vector<float>{0.f, -kInf, -kInf, 3.f, -kInf}));
}

TEST(LogitsConstraints, BadWordsBanTheirLastTokenAfterTheirPrefix) {
  LogitsConstraints c;
  c.bad_words = {{4}, {1, 2, 3}};
  EXPECT_EQ(Apply(c, {}), (std::vector<float>{0.f, 1.f, 2.f, 3.f, -kInf}));           // one-token word
  EXPECT_EQ(Apply(c, {0, 1}), (std::vector<float>{0.f, 1.f, 2.f, 3.f, -kInf}));       // prefix not complete
  EXPECT_EQ(Apply(c, {0, 1, 2}), (std::vector<float>{0.f, 1.f, 2.f, -kInf, -kInf}));  // 1 2 -> not 3
  EXPECT_EQ(Apply(c, {2, 1}), (std::vector<float>{0.f, 1.f, 2.f, 3.f, -kInf}));       // wrong order
}

TEST(LogitsConstraints, MinTokensBansEndTokensUntilReached) {
  LogitsConstraints c;
  c.min_tokens = 2;
  c.min_tokens_banned = {2, 4};
  EXPECT_EQ(Apply(c, {}), (std::vector<float>{0.f, 1.f, -kInf, 3.f, -kInf}));
  EXPECT_EQ(Apply(c, {1}), (std::vector<float>{0.f, 1.f, -kInf, 3.f, -kInf}));
  EXPECT_EQ(Apply(c, {1, 1}), (std::vector<float>{0.f, 1.f, 2.f, 3.f, 4.f}));
}

}  // namespace
}  // namespace ferry
