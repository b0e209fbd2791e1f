// The serving engine with K/V stored as f16, bf16, q8_0 and q4_0, and q4_0 with K rotated
// (--cache-rotate) (model tiny-hd64: head_dim 64, so the 32-value blocks fit): batched equals
// alone with chunked prefill, preemption by recompute and static batching; prefix-cache hits
// and forks (copy-on-write of a shared partial block) give the outputs of independent runs.
// Each type's rounding is a function of the written row only, so every one of these stays exact.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "engine_core_fixture.h"

namespace ferry {

// gtest prints a parameter through this (its default dumps the struct's bytes, padding included).
void PrintTo(const KvCacheTypes& t, std::ostream* os) {
  *os << "K " << DTypeName(t.k) << ", V " << DTypeName(t.v) << (t.rotate_k ? ", K rotated" : "");
}

namespace {

class KvTypesEngineTest : public EngineCoreTest, public ::testing::WithParamInterface<KvCacheTypes> {
 protected:
  static void SetUpTestSuite() {
    auto lm = testing::MakeTinyModel(testing::ScratchPath("engine_tiny_hd64.gguf"), "tiny-hd64");
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    lm_ = new LoadedModel(std::move(*lm));
  }
  static EngineConfig TypedConfig() {
    EngineConfig c = Config();
    c.kv_types = GetParam();
    return c;
  }
};

TEST_P(KvTypesEngineTest, BatchedEqualsAloneAlsoChunkedPreemptedAndStatic) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  EngineConfig c = TypedConfig();
  auto alone = Alone(c, prompts, opts);
  EngineConfig chunked = c, tiny = c, stat = c;
  chunked.scheduler.max_batch_tokens = 40;
  tiny.num_blocks = 12;  // forces preemption
  tiny.scheduler.max_batch_tokens = 64;
  stat.scheduler.policy = BatchPolicy::kStatic;
  stat.scheduler.max_num_seqs = 5;
  for (const EngineConfig* cfg : {&c, &chunked, &tiny, &stat}) {
    Run run = RunAll(*cfg, prompts, opts);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(run.tokens[K(static_cast<RequestId>(i), 0)], alone[i]) << "prompt " << i;
    if (cfg == &tiny) {
      EXPECT_GT(run.stats.preemptions, 0);
    }
  }
}

TEST_P(KvTypesEngineTest, PrefixCacheHitsAndForksEqualIndependentRuns) {
  const std::vector<int32_t> shared = Prompt(64, 3);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = shared;
    const std::vector<int32_t> tail = Prompt(20 + i, 10 + i);
    p.insert(p.end(), tail.begin() + 1, tail.end());
    prompts.push_back(p);
  }
  const std::vector<RequestOptions> opts(3, Greedy(8));
  EngineConfig on = TypedConfig(), off = TypedConfig();
  off.prefix_caching = false;
  on.scheduler.max_num_seqs = off.scheduler.max_num_seqs = 1;
  const Run a = RunAll(on, prompts, opts), b = RunAll(off, prompts, opts);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.stats.prefix_hit_tokens, 2 * 64);

  // n = 3 branches share the 37-token prompt's blocks; the partial last block is copied on write.
  RequestOptions o;
  o.sampling.temperature = 1.3f;
  o.sampling.seed = 100;
  o.max_tokens = 12;
  o.ignore_eos = true;
  o.n = 3;
  const std::vector<int32_t> prompt = Prompt(37, 5);
  Run forked = RunAll(TypedConfig(), {prompt}, {o});
  EXPECT_EQ(forked.stats.prefill_tokens_computed, 37);
  for (int br = 0; br < 3; ++br) {
    RequestOptions single = o;
    single.n = 1;
    single.sampling.seed = 100 + static_cast<uint64_t>(br);
    EXPECT_EQ(forked.tokens[K(0, br)], RunAll(TypedConfig(), {prompt}, {single}).tokens[K(0, 0)]) << br;
  }
}

// The stored type changes the outputs (it is not silently ignored): q4_0 K/V move the greedy
// tokens of some prompt away from the f32 cache's.
TEST_P(KvTypesEngineTest, StoredTypeReachesTheKernels) {
  if (GetParam() != KvCacheTypes{DType::kQ4_0, DType::kQ4_0}) GTEST_SKIP() << "checked once, on q4_0";
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> opts;
  Mixed(prompts, opts);
  EngineConfig f32 = TypedConfig();
  f32.kv_types = KvCacheTypes::F32();
  EXPECT_NE(RunAll(TypedConfig(), prompts, opts).tokens, RunAll(f32, prompts, opts).tokens);
}

std::string TypesName(const ::testing::TestParamInfo<KvCacheTypes>& info) {
  return std::string("K_") + DTypeName(info.param.k) + "_V_" + DTypeName(info.param.v) +
         (info.param.rotate_k ? "_rotated" : "");
}

INSTANTIATE_TEST_SUITE_P(Types, KvTypesEngineTest,
                         ::testing::Values(KvCacheTypes{DType::kF16, DType::kF16},
                                           KvCacheTypes{DType::kBF16, DType::kBF16},
                                           KvCacheTypes{DType::kQ8_0, DType::kQ8_0},
                                           KvCacheTypes{DType::kQ4_0, DType::kQ4_0},
                                           KvCacheTypes{DType::kQ8_0, DType::kF16},
                                           KvCacheTypes{DType::kQ4_0, DType::kQ4_0, /*rotate_k=*/true}),
                         TypesName);

}  // namespace
}  // namespace ferry
