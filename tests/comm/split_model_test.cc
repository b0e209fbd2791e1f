// A model split over MPI ranks computes what one process computes: run by ctest under mpirun
// as T=2, P=2 and T=2 x P=2 (--tp=T --pp=P). Each rank loads the trained stories260K twice, whole
// and split, and compares greedy generation token for token, the logits of every step, and
// perplexity; and greedy and top-k sampling from the head's reduced gather (each rank's argmax
// or top K instead of the row) against sampling from whole rows. Tolerance: the split sums a
// layer's output as per-rank partial dot products, so logits differ from the whole model's by
// rounding only: each step's largest difference within 1e-4 of that step's largest |logit|
// (measured: 4.7e-7 at T=2 on a Zen 5; a wrong head, column range or a missing
// reduction is off by O(1)). The greedy run keeps K/V in f32: with the default f16 cache a
// last-bit difference can flip a value's f16 rounding, which 48 steps amplify to 2.3e-4 —
// the cache's rounding, not the split's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "comm/process_groups.h"
#include "comm/world.h"
#include "engine/engine_run.h"
#include "engine/loaded_model.h"
#include "engine/perplexity.h"
#include "model/kv_cache.h"
#include "model/logit_candidates.h"
#include "sampling/sampler.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"

namespace ferry {
namespace {

comm::ProcessGroups* g_groups = nullptr;
int g_tp = 1, g_pp = 1;
constexpr float kLogitTolerance = 1e-4f;  // relative to the step's largest |logit|
const char* kModel = "stories260K.gguf";

ParallelLayout Layout() {
  return {g_groups->tp.get(), g_groups->pp.get()};
}

StatusOr<LoadedModel> Load(bool split) {
  LoadOptions o;
  if (split) o.parallel = Layout();
  return LoadModel(testing::AssetPath(kModel), o);
}

// Greedy decoding of n tokens after the prompt: the tokens and each step's logits.
struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // [steps][n_vocab]
};
Greedy RunGreedy(const Model& m, const std::vector<int32_t>& prompt, int n, ThreadPool& pool) {
  const ModelConfig& c = m.config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, 256, c.n_kv_heads, c.head_dim, KvCacheTypes::F32());
  EXPECT_TRUE(kv.ok());
  Greedy g;
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  ForwardBatch b;
  for (size_t i = 0; i < prompt.size(); ++i)
    b.Add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int step = 0; step < n; ++step) {
    Status s = m.Forward(b, *kv, logits.data(), &pool);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    g.logits.push_back(logits);
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    g.tokens.push_back(next);
    b.Clear();
    b.Add(next, pos++, 0, true);
  }
  return g;
}

// The largest logit difference of any step, relative to that step's largest |logit|.
float WorstLogitDifference(const Greedy& got, const Greedy& want) {
  float worst = 0;
  for (size_t s = 0; s < want.logits.size() && s < got.logits.size(); ++s) {
    float diff = 0, scale = 0;
    for (size_t v = 0; v < want.logits[s].size(); ++v) {
      diff = std::max(diff, std::fabs(got.logits[s][v] - want.logits[s][v]));
      scale = std::max(scale, std::fabs(want.logits[s][v]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

TEST(SplitModel, GreedyGenerationAndLogitsMatchOneProcess) {
  FERRY_REQUIRE_ASSET(kModel);
  auto whole = Load(false);
  auto split = Load(true);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ThreadPool pool(1);
  const std::vector<int32_t> prompt = whole->tokenizer->Encode("Once upon a time, a little fox", true, false);
  const Greedy want = RunGreedy(*whole->model, prompt, 48, pool);
  const Greedy got = RunGreedy(*split->model, prompt, 48, pool);
  ASSERT_EQ(got.tokens.size(), want.tokens.size());
  EXPECT_EQ(got.tokens, want.tokens);
  const float worst = WorstLogitDifference(got, want);
  EXPECT_LE(worst, kLogitTolerance);
  std::printf("tp %d pp %d: largest logit difference %.3g of the step's largest |logit| over %zu steps\n",
              g_tp, g_pp, worst, want.logits.size());
}

// n tokens sampled after the prompt, each row asking the head for what the sampler needs
// (reduced) or for the whole row; *gathered: the head's gathered bytes per decode step.
std::vector<int32_t> RunSampled(const Model& m, const std::vector<int32_t>& prompt, int n,
                                const SamplingParams& params, bool reduced, ThreadPool& pool,
                                uint64_t* gathered) {
  const ModelConfig& c = m.config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, 256, c.n_kv_heads, c.head_dim);
  EXPECT_TRUE(kv.ok());
  const int32_t top_k = reduced ? LogitsTopKNeeded(params) : 0;
  Sampler sampler(params, c.n_vocab);
  std::vector<int32_t> history = prompt, out;
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  ForwardBatch b;
  for (size_t i = 0; i < prompt.size(); ++i)
    b.Add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size(), top_k);
  ForwardOptions fo;
  uint64_t bytes = 0;
  for (int step = 0; step < n; ++step) {
    fo.logits_gathered_bytes = step > 0 ? &bytes : nullptr;  // decode steps only
    Status s = m.Forward(b, *kv, logits.data(), &pool, fo);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    const int32_t next = sampler.Sample(logits.data(), history);
    out.push_back(next);
    history.push_back(next);
    b.Clear();
    b.Add(next, static_cast<int32_t>(history.size()) - 1, 0, true, top_k);
  }
  *gathered = n > 1 ? bytes / static_cast<uint64_t>(n - 1) : 0;
  return out;
}

TEST(SplitModel, ReducedHeadGatherSamplesWhatTheWholeRowSamples) {
  FERRY_REQUIRE_ASSET(kModel);
  auto whole = Load(false);
  auto split = Load(true);
  ASSERT_TRUE(whole.ok() && split.ok());
  ThreadPool pool(1);
  const std::vector<int32_t> prompt = whole->tokenizer->Encode("The little dog ran", true, false);
  const int64_t n_vocab = whole->model->config().n_vocab, shard = n_vocab / g_tp;
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams top_k;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
  top_k.seed = 1234;
  constexpr int kTokens = 16;  // three runs of each: ranks oversubscribed, CI time is short
  for (const SamplingParams& params : {greedy, top_k}) {
    uint64_t one = 0, full = 0, reduced = 0;
    const std::vector<int32_t> want = RunSampled(*whole->model, prompt, kTokens, params, false, pool, &one);
    const std::vector<int32_t> got_full =
        RunSampled(*split->model, prompt, kTokens, params, false, pool, &full);
    const std::vector<int32_t> got = RunSampled(*split->model, prompt, kTokens, params, true, pool, &reduced);
    EXPECT_EQ(got, got_full) << "top_k " << LogitsTopKNeeded(params);
    EXPECT_EQ(got, want) << "top_k " << LogitsTopKNeeded(params);
    EXPECT_EQ(one, 0u);  // one process gathers nothing
    // The last stage's tensor ranks gather every rank's shard of the row, or its top K
    // (logit, token) pairs; over pipeline stages the last one then sends every stage the row,
    // or the row's top K pairs.
    const int64_t k = LogitsTopKNeeded(params);
    uint64_t want_full = 0, want_reduced = 0;
    if (g_tp > 1 && g_groups->pp->rank() == g_pp - 1) {
      want_full += static_cast<uint64_t>(n_vocab) * sizeof(float);
      want_reduced += static_cast<uint64_t>(g_tp * std::min<int64_t>(k, shard)) * sizeof(LogitCandidate);
    }
    if (g_pp > 1) {
      want_full += static_cast<uint64_t>(n_vocab) * sizeof(float);
      want_reduced += static_cast<uint64_t>(std::min<int64_t>(k, n_vocab)) * sizeof(LogitCandidate);
    }
    EXPECT_EQ(full, want_full);
    EXPECT_EQ(reduced, want_reduced);
  }
}

TEST(SplitModel, EachRowOfABatchGetsWhatItAsksFor) {
  // Three sequences in one batch: a whole row (logprobs), the argmax only, the top 40.
  FERRY_REQUIRE_ASSET(kModel);
  auto split = Load(true);
  ASSERT_TRUE(split.ok());
  const ModelConfig& c = split->model->config();
  ThreadPool pool(1);
  const std::vector<int32_t> need = {0, 1, 40};
  std::vector<std::vector<float>> rows[2];  // [asking for whole rows, asking for `need`][seq][n_vocab]
  for (int reduced = 0; reduced < 2; ++reduced) {
    auto kv = ContiguousKvCache::Create(c.n_layers, 3, 64, c.n_kv_heads, c.head_dim);
    ASSERT_TRUE(kv.ok());
    ForwardBatch b;
    for (int32_t seq = 0; seq < 3; ++seq) {
      std::vector<int32_t> p = {1};  // BOS, then 4..10 tokens that vary with the sequence
      for (int32_t i = 1; i < 5 + 3 * seq; ++i) p.push_back(3 + (i * 37 + seq * 101) % 500);
      for (size_t i = 0; i < p.size(); ++i)
        b.Add(p[i], static_cast<int32_t>(i), seq, i + 1 == p.size(),
              reduced ? need[static_cast<size_t>(seq)] : 0);
    }
    std::vector<float> logits(3 * static_cast<size_t>(c.n_vocab));
    ASSERT_TRUE(split->model->Forward(b, *kv, logits.data(), &pool).ok());
    for (size_t seq = 0; seq < 3; ++seq)
      rows[reduced].emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(seq * c.n_vocab),
                                 logits.begin() + static_cast<std::ptrdiff_t>((seq + 1) * c.n_vocab));
  }
  EXPECT_EQ(rows[1][0], rows[0][0]);  // the whole row, bit for bit
  for (size_t seq = 1; seq < 3; ++seq) {
    // The last stage without a vocabulary split computes the whole row anyway; the other
    // stages receive only what the row asks for, as tensor ranks gather only that.
    if (g_tp == 1 && g_groups->pp->rank() == g_pp - 1) {
      EXPECT_EQ(rows[1][seq], rows[0][seq]);
      continue;
    }
    // The row's K largest (larger logit, then lower token) keep their values; the rest is -inf.
    const std::vector<float>& row = rows[0][seq];
    std::vector<int32_t> order(row.size());
    for (size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int32_t>(v);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    std::vector<float> want(row.size(), -std::numeric_limits<float>::infinity());
    for (int32_t j = 0; j < need[seq]; ++j) want[order[j]] = row[order[j]];
    EXPECT_EQ(rows[1][seq], want) << "top " << need[seq];
  }
}

TEST(SplitModel, PerplexityMatchesOneProcess) {
  FERRY_REQUIRE_ASSET(kModel);
  FERRY_REQUIRE_ASSET("eval-text/tinystories_sample.txt");
  std::ifstream in(testing::AssetPath("eval-text/tinystories_sample.txt"));
  std::stringstream text;
  text << in.rdbuf();
  auto whole = Load(false);
  auto split = Load(true);
  ASSERT_TRUE(whole.ok() && split.ok());
  const std::vector<int32_t> tokens = whole->tokenizer->Encode(text.str(), true, false);
  PerplexityOptions po;
  po.n_ctx = 128;
  po.max_chunks = 4;
  ThreadPool pool(1);
  auto want = Perplexity(*whole, pool, tokens, po);
  auto got = Perplexity(*split, pool, tokens, po);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->n_scored, want->n_scored);
  EXPECT_NEAR(got->ppl, want->ppl, 1e-5 * want->ppl);
  EXPECT_GT(want->n_scored, 100);
}

TEST(SplitModel, EachRankHoldsItsShareOfTheWeightsAndKvHeads) {
  FERRY_REQUIRE_ASSET(kModel);
  auto whole = Load(false);
  auto split = Load(true);
  ASSERT_TRUE(whole.ok() && split.ok());
  const ModelConfig &w = whole->model->config(), &s = split->model->config();
  EXPECT_EQ(s.n_heads, w.n_heads / g_tp);
  EXPECT_EQ(s.n_kv_heads, std::max(1, w.n_kv_heads / g_tp));
  EXPECT_EQ(s.ffn_dim, w.ffn_dim / g_tp);
  // Per-token weight bytes: the layers and head divide by T x P (the head is on the last stage
  // only, so stages differ a little); about 1/N with a few percent of slack for the split head.
  const double share =
      static_cast<double>(split->model->WeightBytes()) / static_cast<double>(whole->model->WeightBytes());
  const double n = g_tp * g_pp;
  EXPECT_LT(share, 1.0 / n + 0.15) << "share " << share;
  EXPECT_GT(share, 1.0 / n - 0.15) << "share " << share;
}

// Mixture-of-experts models split like the dense FFN, expert by expert (gate/up rows, down
// columns), with the router whole on every rank so that all ranks route alike: Mixtral-style,
// qwen2moe (gated shared expert, attention biases), qwen3moe (per-head q/k norms) and gpt-oss
// (expert and W_o biases, attention sinks per head, sliding layers) and deepseek2 (MLA split by
// query heads over a replicated latent cache; a dense first layer; shared experts, scaled
// weights), with and without a
// capacity factor (the drops follow the routing, the same on every rank). f32 weights, so that
// the tolerance is the dense one: with q8_0 weights a split's last-bit difference sometimes moves
// an activation across a quantization step, which random weights amplify to ~1e-2 (moe_test's
// MoeSplit checks the q8_0 layer on identical inputs).
TEST(SplitModel, MixtureOfExpertsModelsMatchOneProcess) {
  const int rank = g_groups->world->rank();
  ThreadPool pool(1);
  for (const char* preset :
       {"moe-tiny", "qwen2moe-tiny", "qwen3moe-tiny", "gpt-oss-tiny", "deepseek2-tiny"}) {
    SCOPED_TRACE(preset);
    // Each rank writes its own copy (same seed: same bytes).
    const std::string path =
        testing::ScratchPath(std::string("split_") + preset + "_r" + std::to_string(rank) + ".gguf");
    SyntheticModelOptions so;
    so.preset = preset;
    so.type = DType::kF32;
    so.stddev = 0.08f;
    ASSERT_TRUE(WriteSyntheticModel(path, so).ok());
    for (double capacity : {0.0, 1.0}) {
      LoadOptions o;
      o.parallel = Layout();
      o.sparsity.moe_capacity_factor = capacity;
      auto split = LoadModel(path, o);
      ASSERT_TRUE(split.ok()) << split.status().ToString();
      LoadOptions w;
      w.sparsity.moe_capacity_factor = capacity;
      auto one = LoadModel(path, w);
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      const std::vector<int32_t> prompt = testing::TestPrompt(24, 3);
      const Greedy want = RunGreedy(*one->model, prompt, 12, pool);
      const Greedy got = RunGreedy(*split->model, prompt, 12, pool);
      EXPECT_EQ(got.tokens, want.tokens) << "capacity " << capacity;
      ASSERT_EQ(got.logits.size(), want.logits.size());
      EXPECT_LE(WorstLogitDifference(got, want), kLogitTolerance) << "capacity " << capacity;
      // The experts' bytes divide by T like the rest of the layers.
      const double share =
          static_cast<double>(split->model->WeightBytes()) / static_cast<double>(one->model->WeightBytes());
      EXPECT_LT(share, 1.0 / (g_tp * g_pp) + 0.15) << "share " << share;
    }
  }
}

TEST(SplitModel, SparsityOptionsAndTapsAreRefusedUnderASplit) {
  FERRY_REQUIRE_ASSET(kModel);
  LoadOptions o;
  o.parallel = Layout();
  o.sparsity.attn_skip_threshold = 0.01f;  // value skipping: not supported split
  auto lm = LoadModel(testing::AssetPath(kModel), o);
  ASSERT_FALSE(lm.ok());
  EXPECT_NE(lm.status().message().find("--tensor-parallel / --pipeline-parallel"), std::string::npos)
      << lm.status().message();
  auto split = Load(true);
  ASSERT_TRUE(split.ok());
  const ModelConfig& c = split->model->config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, 8, c.n_kv_heads, c.head_dim);
  ASSERT_TRUE(kv.ok());
  ForwardBatch b;
  b.Add(1, 0, 0, true);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  SparsityOptions run;
  run.attn_skip_threshold = 0.01f;
  ForwardOptions fo;
  fo.sparsity = &run;
  ThreadPool pool(1);
  EXPECT_FALSE(split->model->Forward(b, *kv, logits.data(), &pool, fo).ok());  // every rank alike
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tp=", 5) == 0) ferry::g_tp = std::atoi(argv[i] + 5);
    if (std::strncmp(argv[i], "--pp=", 5) == 0) ferry::g_pp = std::atoi(argv[i] + 5);
  }
  auto world = ferry::comm::OpenWorld({.timeout_s = 30});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  auto groups = ferry::comm::MakeProcessGroups(std::move(*world), ferry::g_tp, ferry::g_pp);
  if (!groups.ok()) {
    std::fprintf(stderr, "%s\n", groups.status().ToString().c_str());
    return 1;
  }
  ferry::g_groups = &*groups;
  return RUN_ALL_TESTS();
}
