// Structured output end to end on the trained stories260K model: every output of a request
// under a JSON Schema validates (or, cut off by max_tokens, is a prefix the grammar accepts),
// with forks, chunked prefill, preemption, speculative decoding and beam search.
#include <gtest/gtest.h>

#include "../constraint/json_validator.h"
#include "constraint/constraint.h"
#include "constraint/matcher.h"
#include "engine/beam_search.h"
#include "engine/constraint_vocab.h"
#include "engine_run.h"
#include "test_util.h"

namespace ferry {
namespace {

const char* kSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
  "age":{"type":"integer","minimum":0,"maximum":120},"pets":{"type":"array","items":{"enum":["cat","dog"]},"maxItems":2},
  "ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false})";

class ConstraintEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveAsset("stories260K.gguf")) GTEST_SKIP() << "stories260K.gguf not in FERRY_ASSETS";
    auto lm = LoadModel(testing::AssetPath("stories260K.gguf"));
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = std::make_unique<LoadedModel>(std::move(lm).value());
    cache_ = std::make_unique<constraint::GrammarCache>(ConstraintVocabulary(*lm_->tokenizer));
    constraint::ConstraintSpec spec;
    spec.kind = constraint::ConstraintSpec::Kind::kJsonSchema;
    spec.text = kSchema;
    auto g = cache_->Get(spec);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    grammar_ = *g;
  }

  // Complete outputs (ending in an end token) parse and validate; outputs cut off by
  // max_tokens are accepted by the grammar as a prefix.
  void ExpectValid(const std::vector<int32_t>& tokens, const std::string& finish) {
    constraint::Matcher m(grammar_);
    for (int32_t t : tokens) ASSERT_TRUE(m.AcceptToken(t)) << "token " << t << " left the grammar";
    if (finish == "length") return;
    ASSERT_EQ(finish, "stop");
    // The engine does not emit the end token; beam hypotheses keep it.
    std::vector<int32_t> text_tokens = tokens;
    if (m.terminated()) {
      text_tokens.pop_back();
    } else {
      ASSERT_TRUE(m.CanEnd()) << "stopped where the grammar may not end";
    }
    std::string text = lm_->tokenizer->Decode(text_tokens);
    auto v = nlohmann::ordered_json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    auto schema = nlohmann::ordered_json::parse(kSchema);
    EXPECT_TRUE(constraint::testing::Validate(schema, v, schema)) << text;
    ++complete_;
  }

  RequestOptions Options(uint64_t seed, int n, int max_tokens) const {
    RequestOptions o;
    o.sampling.temperature = 1.0f;
    o.sampling.top_k = 0;
    o.sampling.top_p = 1.0f;
    o.sampling.min_p = 0.0f;
    o.sampling.seed = seed;
    o.sampling.constraint = grammar_;
    o.n = n;
    o.max_tokens = max_tokens;
    return o;
  }

  std::unique_ptr<LoadedModel> lm_;
  std::unique_ptr<constraint::GrammarCache> cache_;
  std::shared_ptr<const constraint::CompiledGrammar> grammar_;
  int complete_ = 0;
};

TEST_F(ConstraintEngine, EveryOutputValidatesWithForksChunkedPrefillAndPreemption) {
  EngineConfig c;
  c.block_size = 4;
  c.num_blocks = 40;  // tight: sequences get preempted and recomputed
  c.threads = 1;
  c.scheduler.max_batch_tokens = 16;  // prompts split into chunks
  c.scheduler.max_seq_len = 256;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> options;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(testing::TestPrompt(20 + 3 * i, i));
    options.push_back(Options(100 + static_cast<uint64_t>(i), i % 2 ? 3 : 1, 120));
  }
  testing::EngineRun run = testing::RunEngineToCompletion(*lm_, c, prompts, options);
  EXPECT_GT(run.stats.preemptions, 0) << "the test meant to exercise preemption";
  ASSERT_EQ(run.tokens.size(), 12u);
  for (const auto& [key, tokens] : run.tokens) ExpectValid(tokens, run.finish_reason[key]);
  EXPECT_GT(complete_, 3);
}

TEST_F(ConstraintEngine, MaxTokensMidJsonEndsWithLength) {
  EngineConfig c;
  c.threads = 1;
  testing::EngineRun run =
      testing::RunEngineToCompletion(*lm_, c, {testing::TestPrompt(8, 1)}, {Options(5, 1, 3)});
  ASSERT_EQ(run.tokens.size(), 1u);
  const std::pair<RequestId, int32_t> key{0, 0};
  EXPECT_EQ(run.finish_reason[key], "length");
  ExpectValid(run.tokens[key], "length");
}

TEST_F(ConstraintEngine, SpeculativeDecodingKeepsOutputsValidAndGreedyUnchanged) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> greedy, sampled;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(testing::TestPrompt(16, i));
    RequestOptions g = Options(7, 1, 200);
    g.sampling.temperature = 0;
    greedy.push_back(g);
    sampled.push_back(Options(30 + static_cast<uint64_t>(i), 1, 200));
  }
  EngineConfig plain;
  plain.threads = 1;
  EngineConfig spec = plain;
  spec.spec.ngram = 3;  // prompt lookup: drafts are often off-grammar and get rejected
  spec.spec.num_tokens = 4;
  testing::EngineRun a = testing::RunEngineToCompletion(*lm_, plain, prompts, greedy);
  testing::EngineRun b = testing::RunEngineToCompletion(*lm_, spec, prompts, greedy);
  EXPECT_GT(b.stats.spec_verifications, 0);
  EXPECT_EQ(a.tokens, b.tokens) << "speculation changed the constrained greedy output";
  testing::EngineRun s = testing::RunEngineToCompletion(*lm_, spec, prompts, sampled);
  for (const auto& [key, tokens] : a.tokens) ExpectValid(tokens, a.finish_reason[key]);
  for (const auto& [key, tokens] : s.tokens) ExpectValid(tokens, s.finish_reason[key]);
  EXPECT_GT(complete_, 2);
}

TEST_F(ConstraintEngine, BeamSearchHypothesesFollowTheGrammar) {
  ThreadPool pool(1);
  BeamSearchOptions o;
  o.beam_width = 3;
  o.max_tokens = 60;
  o.constraint = grammar_;
  for (int32_t id = 0; id < lm_->tokenizer->n_vocab(); ++id)
    if (lm_->tokenizer->IsEog(id)) o.end_tokens.push_back(id);
  auto hyps = BeamSearch(*lm_->model, &pool, testing::TestPrompt(10, 2), o);
  ASSERT_TRUE(hyps.ok()) << hyps.status().ToString();
  ASSERT_FALSE(hyps->empty());
  for (const BeamHypothesis& h : *hyps) ExpectValid(h.tokens, h.finish_reason);
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// A grammar that names the model's control token <s> (by its text) makes the engine emit that
// token, mid-output: the constraint vocabulary carries control tokens' texts.
TEST_F(ConstraintEngine, TokenTerminalsEmitControlTokens) {
  constraint::ConstraintSpec spec;
  spec.kind = constraint::ConstraintSpec::Kind::kGbnf;
  spec.text = "root ::= <s> \" Once\" <s> [a-z ]{1,8}\n";
  auto g = cache_->Get(spec);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const int32_t bos = lm_->tokenizer->bos_id();
  ASSERT_GE(bos, 0);
  EngineConfig c;
  c.threads = 1;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> options;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(testing::TestPrompt(8 + i, i));
    RequestOptions o = Options(7 + static_cast<uint64_t>(i), 1, 16);
    o.sampling.constraint = *g;
    options.push_back(o);
  }
  testing::EngineRun run = testing::RunEngineToCompletion(*lm_, c, prompts, options);
  ASSERT_EQ(run.tokens.size(), 3u);
  for (const auto& [key, tokens] : run.tokens) {
    ASSERT_GE(tokens.size(), 3u);
    EXPECT_EQ(tokens.front(), bos);
    constraint::Matcher m(*g);
    int32_t bos_count = 0;
    for (int32_t t : tokens) {
      ASSERT_TRUE(m.AcceptToken(t)) << "token " << t;
      bos_count += t == bos;
    }
    EXPECT_EQ(bos_count, 2);
    EXPECT_EQ(lm_->tokenizer->Decode(tokens, /*render_special=*/true).rfind("<s> Once<s>", 0), 0u)
        << lm_->tokenizer->Decode(tokens, true);
  }
}

}  // namespace
}  // namespace ferry
