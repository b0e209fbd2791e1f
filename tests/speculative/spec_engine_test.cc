// Speculative decoding inside the batching engine: greedy outputs are identical with and
// without speculation (n-gram lookup, a q4 self-draft, a separate draft model; batched, with
// requests that do not speculate in the same steps; synthetic and trained models), KV blocks
// balance after many rejections (target and draft, across block boundaries, with prefix-shared
// blocks and forks), prompt lookup accepts most drafts on repeating input, and sampled
// continuations through the engine follow the target's exact distribution (chi-square).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chi_square.h"
#include "engine/engine_core.h"
#include "engine/engine_run.h"
#include "engine/loaded_model.h"
#include "model/kv_cache.h"
#include "speculative/draft_model_proposer.h"
#include "speculative/self_draft.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"

namespace ferry {
namespace {

std::string TempModel(const std::string& name) {
  return testing::ScratchPath("spec_" + name + ".gguf");
}

StatusOr<LoadedModel> MakeModel(const std::string& name, uint64_t seed, float stddev) {
  SyntheticModelOptions o;
  o.preset = "tiny";
  o.type = DType::kQ8_0;
  o.seed = seed;
  o.stddev = stddev;
  const std::string path = TempModel(name);
  FERRY_RETURN_IF_ERROR(WriteSyntheticModel(path, o));
  return LoadModel(path);
}

struct Models {
  LoadedModel target;       // tiny q8_0, weights large enough that greedy choices are far from ties
  LoadedModel other_draft;  // the same shapes and vocabulary, different weights: a poor draft
  spec::QuantizedDraft q4;  // the target's own weights in q4_0
};
Models* g_models = nullptr;

class SpecEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto target = MakeModel("target", 1234, 0.08f);
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    auto other = MakeModel("other", 99, 0.08f);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    auto q4 = spec::MakeQuantizedDraft(*target->source, DType::kQ4_0, nullptr);
    ASSERT_TRUE(q4.ok()) << q4.status().ToString();
    g_models = new Models{std::move(*target), std::move(*other), std::move(*q4)};
  }
  static void TearDownTestSuite() {
    delete g_models;
    g_models = nullptr;
  }
  void SetUp() override { ASSERT_NE(g_models, nullptr) << "test models could not be made"; }

  static EngineConfig Config(int32_t block_size = 16) {
    EngineConfig c;
    c.num_blocks = 512;
    c.block_size = block_size;
    c.threads = 2;
    c.scheduler.max_batch_tokens = 256;
    c.scheduler.max_num_seqs = 16;
    return c;
  }

  using Run = testing::EngineRun;
  // Also checks that a draft model's blocks came back.
  static Run RunAll(const LoadedModel& lm, const EngineConfig& config,
                    const std::vector<std::vector<int32_t>>& prompts,
                    const std::vector<RequestOptions>& options) {
    return testing::RunEngineToCompletion(lm, config, prompts, options, [](const EngineCore& core) {
      if (auto* d = dynamic_cast<const spec::DraftModelProposer*>(core.proposer())) {
        EXPECT_EQ(d->kv_manager().NumFreeBlocks(), d->kv_manager().num_blocks()) << "draft KV blocks leaked";
      }
    });
  }
  static std::vector<int32_t> Prompt(int n, int seed) { return testing::TestPrompt(n, seed); }
  static RequestOptions Greedy(int32_t max_tokens) { return testing::GreedyOptions(max_tokens); }

  // Greedy tokens of 10 prompts with and without speculation must be identical.
  static void ExpectGreedyIdentical(const LoadedModel& lm, const spec::SpecConfig& sc,
                                    const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens,
                                    int64_t min_accepted) {
    std::vector<RequestOptions> opts;
    for (size_t i = 0; i < prompts.size(); ++i) {
      opts.push_back(Greedy(max_tokens + static_cast<int32_t>(i % 3) * 5));
      opts.back().sampling.repeat_penalty = i % 4 == 1 ? 1.2f : 1.0f;  // penalties see the drafts too
      if (i % 5 == 4) opts.back().spec_tokens = 0;                     // some requests do not speculate
      if (i % 5 == 2) opts.back().spec_tokens = 2;
    }
    // Block size 4 for both (attention sums per block): rollbacks cross block boundaries.
    EngineConfig plain = Config(4), with = Config(4);
    with.spec = sc;
    Run a = RunAll(lm, plain, prompts, opts);
    Run b = RunAll(lm, with, prompts, opts);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto key = std::make_pair(static_cast<RequestId>(i), 0);
      EXPECT_EQ(a.tokens[key].size(), static_cast<size_t>(opts[i].max_tokens));
      EXPECT_EQ(a.tokens[key], b.tokens[key]) << "prompt " << i;
    }
    EXPECT_EQ(a.stats.spec_verifications, 0);
    EXPECT_GT(b.stats.spec_verifications, 0);
    EXPECT_GE(b.stats.spec_accepted_tokens, min_accepted);
    std::printf("acceptance %.3f, mean accepted %.2f over %lld verifications\n", b.stats.SpecAcceptanceRate(),
                b.stats.SpecMeanAcceptedTokens(), static_cast<long long>(b.stats.spec_verifications));
  }

  static std::vector<std::vector<int32_t>> TenPrompts() {
    std::vector<std::vector<int32_t>> p;
    for (int i = 0; i < 10; ++i) p.push_back(Prompt(5 + (i * 13) % 40, i + 1));
    return p;
  }
};

TEST_F(SpecEngineTest, GreedyIdenticalWithNgramLookup) {
  spec::SpecConfig sc;
  sc.ngram = 3;
  ExpectGreedyIdentical(g_models->target, sc, TenPrompts(), 40, 1);
}

TEST_F(SpecEngineTest, GreedyIdenticalWithQ4SelfDraft) {
  spec::SpecConfig sc;
  sc.draft_model = g_models->q4.model.get();
  // The q4 copy agrees with its q8_0 original on most greedy choices.
  ExpectGreedyIdentical(g_models->target, sc, TenPrompts(), 40, 50);
}

TEST_F(SpecEngineTest, GreedyIdenticalWithASeparateDraftModelAndNoAdaptation) {
  spec::SpecConfig sc;
  sc.draft_model = g_models->other_draft.model.get();
  sc.num_tokens = 5;
  sc.adaptive = false;  // keep drafting 5 mostly-wrong tokens: many rollbacks
  ExpectGreedyIdentical(g_models->target, sc, TenPrompts(), 30, 0);
}

TEST_F(SpecEngineTest, GreedyIdenticalOnTheTrainedModel) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto lm = LoadModel(testing::AssetPath("stories260K.gguf"));
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  const std::vector<std::string> texts = {
      "Once upon a time",   "There was a big", "Lily and Ben", "The cat", "One day, a little boy",
      "Tom had a red ball", "The sun was",     "Mom said",     "A bird",  "Sam liked to"};
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& t : texts) prompts.push_back(lm->tokenizer->Encode(t, true, false));
  spec::SpecConfig ngram;
  ngram.ngram = 3;
  ExpectGreedyIdentical(*lm, ngram, prompts, 60, 20);
  auto q4 = spec::MakeQuantizedDraft(*lm->source, DType::kQ4_0, nullptr);
  ASSERT_TRUE(q4.ok()) << q4.status().ToString();
  spec::SpecConfig self;
  self.draft_model = q4->model.get();
  ExpectGreedyIdentical(*lm, self, prompts, 60, 100);
}

TEST_F(SpecEngineTest, KvBlocksBalanceAfterManyRejectionsWithSharedPrefixesAndForks) {
  // A poor draft, K = 6 without adaptation, block size 4, a shared 24-token prefix (prefix
  // cache hits), n = 2 forks and sampling: thousands of rejected drafts rolled back. RunAll
  // checks that every target and draft block is free at the end.
  spec::SpecConfig sc;
  sc.draft_model = g_models->other_draft.model.get();
  sc.num_tokens = 6;
  sc.adaptive = false;
  EngineConfig c = Config(4);
  c.spec = sc;
  c.num_blocks = 96;  // tight: preemption happens too
  const std::vector<int32_t> shared = Prompt(24, 7);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p = shared;
    for (int j = 0; j < i % 5; ++j) p.push_back(10 + i * 7 + j);
    prompts.push_back(p);
    RequestOptions o = Greedy(40);
    if (i % 2 == 1) {
      o.sampling.temperature = 1.0f;
      o.sampling.seed = 100 + static_cast<uint64_t>(i);
    }
    if (i % 4 == 3) o.n = 2;
    opts.push_back(o);
  }
  Run r = RunAll(g_models->target, c, prompts, opts);
  EXPECT_GT(r.stats.spec_draft_tokens - r.stats.spec_accepted_tokens, 500);
  EXPECT_GT(r.stats.prefix_hit_tokens, 0);
  EXPECT_GT(r.stats.preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(r.tokens[std::make_pair(static_cast<RequestId>(i), 0)].size(), 40u) << "request " << i;
}

TEST_F(SpecEngineTest, PromptLookupAcceptsMostDraftsOnRepeatingInput) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto lm = LoadModel(testing::AssetPath("stories260K.gguf"));
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  const std::string passage =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
      "she "
      "saw a big, red ball. ";
  // The passage, then its start again: the model's continuation copies it.
  std::vector<int32_t> prompt = lm->tokenizer->Encode(passage + passage + "Once upon a time,", true, false);
  spec::SpecConfig sc;
  sc.ngram = 3;
  EngineConfig c = Config();
  c.spec = sc;
  Run r = RunAll(*lm, c, {prompt}, {Greedy(30)});
  EXPECT_GT(r.stats.spec_verifications, 0);
  EXPECT_GT(r.stats.SpecAcceptanceRate(), 0.5)
      << r.stats.spec_accepted_tokens << " of " << r.stats.spec_draft_tokens;
  std::printf("prompt lookup acceptance %.3f (%lld of %lld), mean accepted %.2f\n",
              r.stats.SpecAcceptanceRate(), static_cast<long long>(r.stats.spec_accepted_tokens),
              static_cast<long long>(r.stats.spec_draft_tokens), r.stats.SpecMeanAcceptedTokens());
}

TEST_F(SpecEngineTest, StopStringsCutSpeculativeStepsExactlyAsPlainDecoding) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  auto lm = LoadModel(testing::AssetPath("stories260K.gguf"));
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  const std::string passage =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ";
  std::vector<int32_t> prompt = lm->tokenizer->Encode(passage + passage + "Once upon a time,", true, false);
  auto run = [&](bool speculate) {
    EngineConfig c = Config(4);
    if (speculate) c.spec.ngram = 3;
    auto core = EngineCore::Create(*lm->model, &*lm->tokenizer, c);
    EXPECT_TRUE(core.ok());
    RequestOptions o = Greedy(60);
    o.stop = {"play"};
    (*core)->Add(0, prompt, o, (*core)->Now());
    std::vector<int32_t> ids;
    std::string text, reason;
    int outputs_per_step_max = 0;
    while ((*core)->HasWork()) {
      auto outs = (*core)->Step();
      EXPECT_TRUE(outs.ok());
      outputs_per_step_max = std::max(outputs_per_step_max, static_cast<int>(outs->size()));
      for (const RequestOutput& out : *outs) {
        ids.insert(ids.end(), out.token_ids.begin(), out.token_ids.end());
        text += out.text;
        if (out.finished) reason = out.finish_reason;
      }
    }
    EXPECT_EQ(outputs_per_step_max, 1);  // one output per branch and step
    EXPECT_EQ(reason, "stop");
    EXPECT_EQ(text.find("play"), std::string::npos) << text;
    return std::make_pair(ids, text);
  };
  auto plain = run(false), spec = run(true);
  EXPECT_EQ(plain.second, spec.second);
  EXPECT_EQ(plain.first, spec.first);
  EXPECT_FALSE(plain.second.empty());
}

// Exact target probabilities of every continuation of `n` tokens after `prompt` (plain
// forward passes of the target on a contiguous cache, one per prefix).
void ExactContinuations(LoadedModel& lm, const SamplingParams& sp, std::vector<int32_t> seq, int n,
                        double prob, std::vector<int32_t>& path,
                        std::map<std::vector<int32_t>, double>& out) {
  if (n == 0) {
    if (prob > 0) out[path] = prob;
    return;
  }
  const ModelConfig& c = lm.config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim);
  ASSERT_TRUE(kv.ok());
  ForwardBatch b;
  for (size_t i = 0; i < seq.size(); ++i) b.Add(seq[i], static_cast<int32_t>(i), 0, i + 1 == seq.size());
  std::vector<float> logits(static_cast<size_t>(c.n_vocab)), probs(static_cast<size_t>(c.n_vocab));
  ASSERT_TRUE(lm.model->Forward(b, *kv, logits.data(), nullptr).ok());
  Sampler(sp, c.n_vocab).ProcessedProbs(logits.data(), seq, probs);
  for (int32_t t = 0; t < c.n_vocab; ++t) {
    if (probs[static_cast<size_t>(t)] <= 0) continue;
    seq.push_back(t);
    path.push_back(t);
    ExactContinuations(lm, sp, seq, n - 1, prob * probs[static_cast<size_t>(t)], path, out);
    path.pop_back();
    seq.pop_back();
  }
}

// End to end through the engine: 3-token continuations sampled with q4 self-draft speculation
// (tokens 2 and 3 come from verification) follow the target's exact joint distribution.
// Chi-square at significance 0.001 (chi_square.h), fixed seeds, so the test is deterministic.
TEST_F(SpecEngineTest, SampledContinuationsFollowTheTargetDistribution) {
  struct Case {
    float temperature, top_p;
    int32_t top_k;
  };
  for (const Case& cs : {Case{1.5f, 1.0f, 3}, Case{1.2f, 0.8f, 4}}) {
    SamplingParams sp;
    sp.temperature = cs.temperature;
    sp.top_k = cs.top_k;
    sp.top_p = cs.top_p;
    sp.min_p = 0;
    const std::vector<int32_t> prompt = Prompt(8, 3);
    const int64_t samples = 2000;
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(samples), prompt);
    std::vector<RequestOptions> opts;
    for (int64_t i = 0; i < samples; ++i) {
      RequestOptions o;
      o.sampling = sp;
      o.sampling.seed = 5000 + static_cast<uint64_t>(i);
      o.max_tokens = 3;
      o.ignore_eos = true;
      opts.push_back(o);
    }
    EngineConfig c = Config(4);
    c.spec.draft_model = g_models->q4.model.get();
    c.spec.num_tokens = 2;
    Run r = RunAll(g_models->target, c, prompts, opts);
    std::map<std::vector<int32_t>, int64_t> observed;
    for (const auto& [key, toks] : r.tokens) ++observed[toks];
    std::map<std::vector<int32_t>, double> expected;
    std::vector<int32_t> path;
    ExactContinuations(g_models->target, sp, prompt, 3, 1.0, path, expected);
    testing::ChiSquare chi = testing::ChiSquareTest(observed, expected, samples);
    EXPECT_GT(r.stats.spec_verifications, samples / 2);
    EXPECT_GE(chi.dof, 4);
    EXPECT_LT(chi.statistic, chi.Critical001()) << "dof " << chi.dof;
    std::printf("engine chi-square %.1f, dof %d, critical(0.001) %.1f; acceptance %.3f\n", chi.statistic,
                chi.dof, chi.Critical001(), r.stats.SpecAcceptanceRate());
  }
}

}  // namespace
}  // namespace ferry
