// Embeddings through the serving engine: prefill-only requests that pool the final hidden
// states (ForwardOptions::hidden) of the same forward pass the other requests' logits come from.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/engine_core.h"
#include "model/kv_cache.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

struct Job {
  std::vector<int32_t> prompt;
  RequestOptions options;
};

RequestOptions Embed(Pooling p) {
  RequestOptions o;
  o.pooling = p;
  return o;
}

RequestOptions Generate() {
  RequestOptions o;
  o.max_tokens = 5;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return o;
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> t = {1};
  for (int i = 1; i < n; ++i) t.push_back(3 + (i * 37 + salt * 11) % 200);
  return t;
}

// Runs the jobs (ids = index) to completion; returns each embedding request's vector.
std::map<RequestId, std::vector<float>> RunEmbeddings(const LoadedModel& lm, const std::vector<Job>& jobs,
                                                      EngineConfig config = {},
                                                      EngineStats* stats = nullptr) {
  if (config.num_blocks == 0) config.num_blocks = 64;
  config.threads = 1;
  config.block_size = 4;
  auto core = EngineCore::Create(*lm.model, &*lm.tokenizer, config);
  EXPECT_TRUE(core.ok()) << core.status().ToString();
  std::map<RequestId, std::vector<float>> out;
  if (!core.ok()) return out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE((*core)->Validate(jobs[i].prompt, jobs[i].options).ok());
    (*core)->Add(static_cast<RequestId>(i), jobs[i].prompt, jobs[i].options, (*core)->Now());
  }
  while ((*core)->HasWork()) {
    auto outs = (*core)->Step();
    EXPECT_TRUE(outs.ok()) << outs.status().ToString();
    if (!outs.ok()) break;
    for (const RequestOutput& o : *outs) {
      if (jobs[static_cast<size_t>(o.id)].options.pooling == Pooling::kNone) continue;
      EXPECT_TRUE(o.token_ids.empty());  // nothing is sampled
      if (o.finished) {
        EXPECT_EQ(o.finish_reason, "stop");
        out[o.id] = o.embedding;
      }
    }
  }
  EXPECT_EQ((*core)->kv_manager().NumFreeBlocks(), (*core)->num_blocks());  // no KV kept
  if (stats) *stats = (*core)->Stats();
  return out;
}

// Every token's final hidden state, one decode step at a time on a plain cache: [n, dim].
std::vector<std::vector<float>> HiddenOneByOne(const Model& m, const std::vector<int32_t>& prompt) {
  auto kv =
      ContiguousKvCache::Create(m.config().n_layers, 1, 256, m.config().n_kv_heads, m.config().head_dim);
  EXPECT_TRUE(kv.ok());
  std::vector<std::vector<float>> rows;
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  for (size_t p = 0; p < prompt.size(); ++p) {
    ForwardBatch b;
    b.Add(prompt[p], static_cast<int32_t>(p), 0, true);
    std::vector<float> h(static_cast<size_t>(m.config().dim));
    ForwardOptions fo;
    fo.hidden = h.data();
    EXPECT_TRUE(m.Forward(b, *kv, logits.data(), nullptr, fo).ok());
    rows.push_back(h);
  }
  return rows;
}

std::vector<float> Normalized(std::vector<double> v) {
  double n = 0;
  for (double x : v) n += x * x;
  std::vector<float> out;
  for (double x : v) out.push_back(static_cast<float>(x / std::sqrt(n)));
  return out;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], tol) << "dim " << j;
}

class EmbeddingEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lm_ = new StatusOr<LoadedModel>(testing::MakeTinyModel(testing::ScratchPath("engine_embed.gguf")));
    ASSERT_TRUE(lm_->ok()) << lm_->status().ToString();
  }
  static void TearDownTestSuite() { delete lm_; }
  const LoadedModel& lm() { return **lm_; }
  static StatusOr<LoadedModel>* lm_;
};
StatusOr<LoadedModel>* EmbeddingEngineTest::lm_ = nullptr;

TEST_F(EmbeddingEngineTest, VectorHasModelWidthAndUnitNorm) {
  for (Pooling p : {Pooling::kMean, Pooling::kLast, Pooling::kCls}) {
    auto out = RunEmbeddings(lm(), {{Prompt(9, 1), Embed(p)}});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].size(), static_cast<size_t>(lm().model->config().dim)) << PoolingName(p);
    double n = 0;
    for (float x : out[0]) n += double{x} * x;
    EXPECT_NEAR(std::sqrt(n), 1.0, 1e-5) << PoolingName(p);
  }
}

TEST_F(EmbeddingEngineTest, PoolingsEqualTheHiddenStatesComputedOneTokenAtATime) {
  const std::vector<int32_t> prompt = Prompt(11, 2);
  const auto rows = HiddenOneByOne(*lm().model, prompt);
  std::vector<double> sum(rows[0].size(), 0.0);
  for (const auto& r : rows)
    for (size_t j = 0; j < r.size(); ++j) sum[j] += r[j];
  auto out = RunEmbeddings(
      lm(),
      {{prompt, Embed(Pooling::kMean)}, {prompt, Embed(Pooling::kLast)}, {prompt, Embed(Pooling::kCls)}});
  ExpectNear(out[0], Normalized(sum), 2e-5f);
  ExpectNear(out[1], Normalized({rows.back().begin(), rows.back().end()}), 2e-5f);
  ExpectNear(out[2], Normalized({rows.front().begin(), rows.front().end()}), 2e-5f);
  // The three poolings differ (a pooling ignoring its kind would pass the norm test).
  EXPECT_GT(std::abs(out[0][0] - out[1][0]) + std::abs(out[1][0] - out[2][0]), 1e-4f);
}

TEST_F(EmbeddingEngineTest, BatchInvariantAndIdenticalInputsIdenticalVectors) {
  const std::vector<int32_t> a = Prompt(13, 3);
  auto alone = RunEmbeddings(lm(), {{a, Embed(Pooling::kMean)}});
  // In a batch with generating requests and other embeddings, its prefill split into chunks.
  EngineConfig chunked;
  chunked.scheduler.max_batch_tokens = 5;
  auto batched = RunEmbeddings(lm(),
                               {{Prompt(7, 4), Generate()},
                                {a, Embed(Pooling::kMean)},
                                {Prompt(5, 5), Embed(Pooling::kMean)},
                                {a, Embed(Pooling::kMean)}},
                               chunked);
  ExpectNear(batched[1], alone[0], 1e-6f);
  EXPECT_EQ(batched[1], batched[3]);  // identical inputs, identical vectors
  EXPECT_NE(batched[1], batched[2]);
}

TEST_F(EmbeddingEngineTest, CachedPrefixOfAGenerationIsNotReused) {
  const std::vector<int32_t> a = Prompt(16, 6);
  auto fresh = RunEmbeddings(lm(), {{a, Embed(Pooling::kMean)}});
  // The generation caches a's full blocks first; the embedding must still compute every token.
  EngineConfig one;
  one.scheduler.max_num_seqs = 1;
  auto after = RunEmbeddings(lm(), {{a, Generate()}, {a, Embed(Pooling::kMean)}}, one);
  ExpectNear(after[1], fresh[0], 1e-6f);
}

TEST_F(EmbeddingEngineTest, PreemptedEmbeddingIsPooledAgainFromScratch) {
  const std::vector<int32_t> a = Prompt(24, 8);
  auto fresh = RunEmbeddings(lm(), {{a, Embed(Pooling::kMean)}});
  // 9 blocks of 4: the generation's growth preempts the embedding part-way through its
  // chunked prefill; it is recomputed once the generation is done.
  EngineConfig tight;
  tight.num_blocks = 9;
  tight.prefix_caching = false;
  tight.scheduler.max_batch_tokens = 4;
  RequestOptions gen = Generate();
  gen.max_tokens = 24;
  EngineStats stats;
  auto out = RunEmbeddings(lm(), {{Prompt(8, 9), gen}, {a, Embed(Pooling::kMean)}}, tight, &stats);
  EXPECT_GT(stats.preemptions, 0);
  ExpectNear(out[1], fresh[0], 1e-6f);
}

TEST_F(EmbeddingEngineTest, ValidationNeedsOneBranchButNoNewTokens) {
  EngineConfig config;
  config.num_blocks = 64;
  config.threads = 1;
  config.scheduler.max_seq_len = 16;
  auto core = EngineCore::Create(*lm().model, &*lm().tokenizer, config);
  ASSERT_TRUE(core.ok());
  RequestOptions o = Embed(Pooling::kMean);
  o.max_tokens = 0;
  EXPECT_TRUE((*core)->Validate(Prompt(16, 1), o).ok());  // the whole context, no room to generate
  EXPECT_FALSE((*core)->Validate(Prompt(17, 1), o).ok());
  o.n = 2;
  EXPECT_FALSE((*core)->Validate(Prompt(4, 1), o).ok());
}

TEST_F(EmbeddingEngineTest, HiddenStatesLeaveTheLogitsUnchanged) {
  const Model& m = *lm().model;
  const std::vector<int32_t> prompt = Prompt(6, 7);
  std::vector<float> plain, with;
  for (bool hidden : {false, true}) {
    auto kv =
        ContiguousKvCache::Create(m.config().n_layers, 1, 64, m.config().n_kv_heads, m.config().head_dim);
    ASSERT_TRUE(kv.ok());
    ForwardBatch b;
    for (size_t p = 0; p < prompt.size(); ++p) b.Add(prompt[p], static_cast<int32_t>(p), 0, p % 2 == 1);
    std::vector<float> logits(static_cast<size_t>(b.NumLogits() * m.config().n_vocab));
    std::vector<float> h(prompt.size() * static_cast<size_t>(m.config().dim));
    ForwardOptions fo;
    if (hidden) fo.hidden = h.data();
    ASSERT_TRUE(m.Forward(b, *kv, logits.data(), nullptr, fo).ok());
    (hidden ? with : plain) = logits;
  }
  EXPECT_EQ(plain, with);
  EXPECT_TRUE(m.WritesHidden());
}

}  // namespace
}  // namespace ferry
