// Generation loop on a synthetic model: determinism, limits, stop strings, errors.
#include "engine/generator.h"

#include <gtest/gtest.h>

#include "synthetic/synthetic_model.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto lm = testing::MakeTinyModel(testing::TempDir() + "/tiny.gguf");
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = std::make_unique<LoadedModel>(std::move(*lm));
  }

  std::pair<std::string, GenerateStats> Gen(const GenerateOptions& o, const std::string& prompt = "the cat") {
    std::string text;
    auto ids = lm_->tokenizer->Encode(prompt, true, true);
    auto st = Generate(*lm_, pool_, ids, o, [&](std::string_view t) { text += t; });
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return {text, st.ok() ? *st : GenerateStats{}};
  }

  std::unique_ptr<LoadedModel> lm_;
  ThreadPool pool_{2};
};

TEST_F(GeneratorTest, SameSeedSameTextDifferentSeedDifferentText) {
  GenerateOptions o;
  o.n_predict = 40;
  o.ignore_eos = true;
  o.sampling.temperature = 1.5f;
  o.sampling.seed = 11;
  auto a = Gen(o), b = Gen(o);
  o.sampling.seed = 12;
  auto c = Gen(o);
  EXPECT_EQ(a.first, b.first);
  EXPECT_NE(a.first, c.first);
}

TEST_F(GeneratorTest, GreedyHonoursTokenLimit) {
  GenerateOptions o;
  o.n_predict = 17;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  std::vector<int32_t> ids;
  auto prompt = lm_->tokenizer->Encode("a b", true, true);
  auto st = Generate(
      *lm_, pool_, prompt, o, [](std::string_view) {}, &ids);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generated_tokens, 17);
  EXPECT_EQ(ids.size(), 17u);
  EXPECT_EQ(st->finish_reason, "length");
  EXPECT_EQ(st->prompt_tokens, static_cast<int32_t>(prompt.size()));
}

TEST_F(GeneratorTest, StopStringEndsGenerationAndIsNotEmitted) {
  GenerateOptions o;
  o.n_predict = 60;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  auto [full, st_full] = Gen(o);
  ASSERT_GE(full.size(), 6u);
  std::string stop = full.substr(full.size() / 2, 3);  // occurs in the greedy text
  o.stop = {stop};
  auto [cut, st_cut] = Gen(o);
  EXPECT_EQ(cut, full.substr(0, full.find(stop)));
  EXPECT_EQ(st_cut.finish_reason, "stop");
}

TEST_F(GeneratorTest, PromptLongerThanContextIsAnError) {
  GenerateOptions o;
  o.n_ctx = 8;
  std::vector<int32_t> prompt(8, 5);
  auto st = Generate(*lm_, pool_, prompt, o, [](std::string_view) {});
  EXPECT_EQ(st.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Generate(*lm_, pool_, {}, o, [](std::string_view) {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(GeneratorTest, StopsWhenContextIsFull) {
  GenerateOptions o;
  o.n_ctx = 16;
  o.n_predict = 100;
  o.ignore_eos = true;
  std::vector<int32_t> prompt(10, 300);
  auto st = Generate(*lm_, pool_, prompt, o, [](std::string_view) {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generated_tokens, 7);  // positions 10..15 fed back, plus the last sampled one
  EXPECT_EQ(st->finish_reason, "length");
}

}  // namespace
}  // namespace ferry
