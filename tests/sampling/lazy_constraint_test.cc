// A lazy constraint (reasoning's </think>, a tool call's opener) leaves the output free until
// its trigger token, then holds it to the grammar from the next token on; a rollback past the
// trigger (a rejected draft, a recompute) frees it again.
#include <gtest/gtest.h>

#include "constraint/gbnf_parser.h"
#include "sampling/sampler.h"

namespace ferry {
namespace {

// Tokens: 0 "{", 1 "}", 2 "x" (the trigger), 3 "y", 4 the end token.
std::shared_ptr<const constraint::CompiledGrammar> Braces() {
  auto vocab = std::make_shared<const constraint::TokenVocabulary>(
      std::vector<std::string>{"{", "}", "x", "y", ""}, std::vector<int32_t>{4});
  auto g = constraint::ParseGbnf("root ::= \"{\" \"}\"\n");
  EXPECT_TRUE(g.ok());
  auto p = constraint::Lower(*g);
  EXPECT_TRUE(p.ok());
  return std::make_shared<const constraint::CompiledGrammar>(std::move(p).value(), vocab);
}

TEST(LazyConstraint, AppliesOnlyAfterItsTrigger) {
  SamplingParams params;
  params.temperature = 0;
  params.top_k = 0;
  params.constraint = Braces();
  params.constraint_triggers = {2};
  Sampler s(params, 5);
  // "y" has the highest logit; the grammar never allows it.
  auto sample = [&](std::vector<int32_t> history) {
    std::vector<float> logits = {1, 0, 0, 5, 0};
    return s.Sample(logits.data(), history);
  };
  const std::vector<int32_t> prompt = {3, 3};
  EXPECT_EQ(sample(prompt), 3) << "constrained before the trigger";
  EXPECT_EQ(sample({3, 3, 3, 3}), 3) << "free text before the trigger is not the grammar's";
  EXPECT_EQ(sample({3, 3, 3, 2}), 0) << "the grammar starts right after the trigger";
  EXPECT_EQ(sample({3, 3, 3, 2, 0}), 1);
  EXPECT_EQ(sample({3, 3, 3, 2, 0, 1}), 4) << "only the end where the grammar ends";
  EXPECT_EQ(sample({3, 3, 3}), 3) << "a rollback past the trigger frees the output";
  EXPECT_EQ(sample({3, 3, 2, 0}), 1) << "a new trigger position restarts the grammar";
}

TEST(LazyConstraint, WithoutTriggersTheGrammarHoldsFromTheStart) {
  SamplingParams params;
  params.temperature = 0;
  params.top_k = 0;
  params.constraint = Braces();
  Sampler s(params, 5);
  std::vector<float> logits = {1, 0, 0, 5, 0};
  EXPECT_EQ(s.Sample(logits.data(), std::vector<int32_t>{3, 3}), 0);
}

}  // namespace
}  // namespace ferry
