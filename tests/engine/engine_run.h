// The engine tests' common driver: run an EngineCore over a fixed set of requests until every
// one finishes, collecting tokens per (request, branch), and check that every KV block came back.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "engine/engine_core.h"
#include "engine/loaded_model.h"

namespace ferry::testing {

struct EngineRun {
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>> tokens;          // per (id, branch)
  std::map<std::pair<RequestId, int32_t>, RequestMetrics> metrics;               // of finished branches
  std::map<std::pair<RequestId, int32_t>, std::string> finish_reason;            // of finished branches
  std::map<std::pair<RequestId, int32_t>, std::vector<TokenLogprobs>> logprobs;  // with options.logprobs
  std::map<RequestId, std::vector<float>> embeddings;  // of finished embedding requests
  EngineStats stats;
  SparsityStats sparsity;     // what the engine's sparsity options skipped
  int requests_finished = 0;  // outputs with request_finished
};

// Steps `core` until it has no work, collecting its outputs into `run`.
inline void StepUntilIdle(EngineCore& core, EngineRun& run) {
  for (int step = 0; step < 100000 && core.HasWork(); ++step) {
    auto outs = core.Step();
    EXPECT_TRUE(outs.ok()) << outs.status().ToString();
    if (!outs.ok()) break;
    for (const RequestOutput& o : *outs) {
      auto& t = run.tokens[{o.id, o.branch}];
      t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
      auto& lp = run.logprobs[{o.id, o.branch}];
      lp.insert(lp.end(), o.logprobs.begin(), o.logprobs.end());
      if (o.finished) {
        run.metrics[{o.id, o.branch}] = o.metrics;
        run.finish_reason[{o.id, o.branch}] = o.finish_reason;
        if (!o.embedding.empty()) run.embeddings[o.id] = o.embedding;
      }
      run.requests_finished += o.request_finished ? 1 : 0;
    }
  }
}

// Adds the prompts (ids 0..n-1) and steps until done: all at once, or with `first_alone` the
// first one to completion before the rest (so they find its prefix blocks cached). `check_core`
// (optional) sees the core once it is idle, before it is destroyed (e.g. to check a draft
// model's blocks).
inline EngineRun RunEngineToCompletion(const LoadedModel& lm, const EngineConfig& config,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       const std::vector<RequestOptions>& options,
                                       const std::function<void(const EngineCore&)>& check_core = {},
                                       bool first_alone = false) {
  auto core = EngineCore::Create(*lm.model, &*lm.tokenizer, config);
  EXPECT_TRUE(core.ok()) << core.status().ToString();
  if (!core.ok()) return {};
  EngineRun run;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE((*core)->Validate(prompts[i], options[i]).ok());
    (*core)->Add(static_cast<RequestId>(i), prompts[i], options[i], (*core)->Now());
    if (i == 0 && first_alone) StepUntilIdle(**core, run);
  }
  StepUntilIdle(**core, run);
  EXPECT_FALSE((*core)->HasWork());
  run.stats = (*core)->Stats();
  run.sparsity = (*core)->sparsity_stats();
  EXPECT_EQ((*core)->kv_manager().NumFreeBlocks(), (*core)->num_blocks()) << "KV blocks leaked";
  if (check_core) check_core(**core);
  return run;
}

// A deterministic prompt of n tokens (BOS first, then ids in [3, 503)) that varies with seed.
inline std::vector<int32_t> TestPrompt(int n, int seed) {
  std::vector<int32_t> t = {1};
  for (int i = 1; i < n; ++i) t.push_back(3 + (i * 37 + seed * 101 + i * i * seed) % 500);
  return t;
}

inline RequestOptions GreedyOptions(int32_t max_tokens) {
  RequestOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  return o;
}

// Requests i = 0..n-1 sharing the prompt `shared`, then a suffix of their own (suffix0 + 5 i
// tokens 3 + (mi i + mj j) % 500); greedy for max0 + step i tokens, except every third (i % 3 == 1):
// two branches sampled at temperature 1.1 with seed seed0 + i (+ branch).
struct RequestSet {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> options;
};
inline RequestSet SharedPrefixRequests(const std::vector<int32_t>& shared, int n, int suffix0, int mi, int mj,
                                       int32_t max0, int32_t step, uint64_t seed0) {
  RequestSet r;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = shared;
    for (int j = 0; j < suffix0 + 5 * i; ++j) p.push_back(3 + (mi * i + mj * j) % 500);
    r.prompts.push_back(p);
    RequestOptions o = GreedyOptions(max0 + step * i);
    if (i % 3 == 1) {
      o.n = 2;
      o.sampling.temperature = 1.1f;
      o.sampling.seed = seed0 + static_cast<uint64_t>(i);
    }
    r.options.push_back(o);
  }
  return r;
}

// One request served alone on `core` to its end: its tokens, their logprobs and how many of its
// prompt tokens came from the prefix cache (pool or tier).
struct Served {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int32_t cached = -1;
};
inline Served ServeOne(EngineCore& core, RequestId id, const std::vector<int32_t>& prompt,
                       int32_t max_tokens) {
  RequestOptions o = GreedyOptions(max_tokens);
  o.logprobs = 0;
  EXPECT_TRUE(core.Validate(prompt, o).ok());
  core.Add(id, prompt, o, core.Now());
  Served s;
  while (core.HasWork()) {
    auto outs = core.Step();
    EXPECT_TRUE(outs.ok()) << outs.status().ToString();
    if (!outs.ok()) break;
    for (const RequestOutput& out : *outs) {
      s.tokens.insert(s.tokens.end(), out.token_ids.begin(), out.token_ids.end());
      for (const TokenLogprobs& lp : out.logprobs) s.logprobs.push_back(lp.logprob);
      if (out.finished) s.cached = out.metrics.cached_prompt_tokens;
    }
  }
  return s;
}
// The same tokens and, bit for bit, the same logprobs.
inline void ExpectSameServed(const Served& a, const Served& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) EXPECT_EQ(a.logprobs[i], b.logprobs[i]) << "token " << i;
}

}  // namespace ferry::testing
