// Issue 9 item 6: does a 2:4-pruned (Wanda --pattern 2:4) matrix decode faster in a 2:4
// compressed format (bench/sparse24_proto.h) than as its dense f16 weights? One GEMV (decode)
// over a TinyLlama FFN-shaped matrix (5632 x 2048, 23 MB f16: streamed from DRAM), 1 and 2
// threads; bytes/s counts the bytes each format reads. Run:
//   sparse24_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "sparse24_proto.h"

namespace ferry {
namespace {

constexpr int64_t kOut = 5632, kIn = 2048;

// A 2:4-pruned matrix (the 2 largest |w| of each group of 4 kept, as magnitude/Wanda 2:4 do).
std::vector<float> Pruned24() {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 0.02f);
  std::vector<float> w(static_cast<size_t>(kOut * kIn));
  for (float& v : w) v = d(rng);
  for (size_t g = 0; g < w.size(); g += 4) {
    int lo1 = 0;
    for (int i = 1; i < 4; ++i)
      if (std::fabs(w[g + i]) < std::fabs(w[g + lo1])) lo1 = i;
    int lo2 = lo1 == 0 ? 1 : 0;
    for (int i = 0; i < 4; ++i)
      if (i != lo1 && std::fabs(w[g + i]) < std::fabs(w[g + lo2])) lo2 = i;
    w[g + lo1] = w[g + lo2] = 0.f;
  }
  return w;
}

std::vector<float> Input() {
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(kIn);
  for (float& v : x) v = d(rng);
  return x;
}

void BM_DenseF16(benchmark::State& state) {
  const auto w = Pruned24();
  std::vector<uint16_t> wf(w.size());
  kernels::QuantizeRow(DType::kF16, w.data(), wf.data(), static_cast<int64_t>(w.size()));
  const auto x = Input();
  std::vector<float> y(kOut);
  ThreadPool pool(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    kernels::MatMul(wf.data(), DType::kF16, kOut, kIn, x.data(), 1, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(wf.size() * 2));
}

void BM_Sparse24F16(benchmark::State& state) {
  const auto s = proto::Pack24(Pruned24(), kOut, kIn);
  const auto x = Input();
  std::vector<float> y(kOut);
  ThreadPool pool(static_cast<int>(state.range(0)));
  const bool avx2 = state.range(1) != 0;
  if (avx2 && kernels::BestSupportedIsa() == kernels::Isa::kScalar) {
    state.SkipWithError("no AVX2");
    return;
  }
  for (auto _ : state) {
    pool.ParallelFor(kOut, [&](int64_t o0, int64_t o1) {
      if (avx2) {
        proto::MatVec24Avx2(s, o0, o1, x.data(), y.data());
      } else {
        proto::MatVec24Ref(s, o0, o1, x.data(), y.data());
      }
    });
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(s.values.size() * 2 + s.index.size()));
}

BENCHMARK(BM_DenseF16)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_Sparse24F16)
    ->ArgNames({"threads", "avx2"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({1, 0})
    ->UseRealTime();

}  // namespace
}  // namespace ferry

BENCHMARK_MAIN();
