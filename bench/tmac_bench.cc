// Issue 14 item 3: a T-MAC-style table-lookup q4_0 GEMV (bench/tmac_proto.h) against Ferry's
// packed q4_0 tile, one token, the same q4_0 weights. Args: variant (0 Ferry packed on the best
// table, 1 T-MAC AVX-512, 2 T-MAC without its per-token table building), n_out (x 2048 inputs), threads,
// copies (matrices cycled per call: 1 keeps a small one in cache, i.e. compute-bound; 48 x 5632 rows stream
// 311 MB from DRAM). Run: tmac_bench --benchmark_min_time=2 ; results: docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "base/aligned_buffer.h"
#include "core/dtype.h"
#include "kernels/kernels.h"
#include "tmac_proto.h"

namespace ferry::proto {
namespace {

constexpr int64_t kIn = 2048;

void BM_Q4_0Gemv(benchmark::State& state) {
  const bool tmac = state.range(0) != 0, prepared = state.range(0) == 2;
  const int64_t n_out = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const int64_t copies = state.range(3);
  if (tmac && !kernels::IsaSupported(kernels::Isa::kAvx512)) {
    state.SkipWithError("this CPU lacks avx512 (F/BW/VL/DQ)");
    return;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 0.02f);
  const size_t row = RowBytes(DType::kQ4_0, kIn);
  std::vector<uint8_t> q(row * static_cast<size_t>(n_out));
  std::vector<float> w(kIn), x(kIn), y(static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    for (float& v : w) v = d(rng);
    kernels::QuantizeRow(DType::kQ4_0, w.data(), q.data() + row * static_cast<size_t>(o), kIn);
  }
  for (float& v : x) v = d(rng) * 50.f;
  std::vector<TmacQ4> tm;
  std::vector<AlignedBuffer> packed;
  for (int64_t c = 0; c < copies; ++c) {
    if (tmac) {
      tm.push_back(PackTmac(q.data(), n_out, kIn));
    } else {
      packed.emplace_back(kernels::PackedBytes(DType::kQ4_0, n_out, kIn));
      kernels::PackWeights(DType::kQ4_0, q.data(), n_out, kIn, packed.back().data(), nullptr);
    }
  }
  ThreadPool pool(threads);
  ThreadPool* p = threads > 1 ? &pool : nullptr;
  TmacAct act;
  PrepareTmacAct(x.data(), kIn, act);
  int64_t c = 0;
  for (auto _ : state) {
    if (prepared)
      TmacGemvPrepared(tm[static_cast<size_t>(c)], act, y.data(), p, /*simd=*/true);
    else if (tmac)
      TmacGemv(tm[static_cast<size_t>(c)], x.data(), y.data(), act, p, /*simd=*/true);
    else
      kernels::MatMulPacked(packed[static_cast<size_t>(c)].data(), DType::kQ4_0, n_out, kIn, x.data(), 1,
                            y.data(), p);
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(row) * n_out);
  state.SetLabel(prepared ? "tmac-prepared/avx512"
                 : tmac   ? "tmac/avx512"
                          : std::string("ferry-packed/") + kernels::IsaName(kernels::ActiveIsa()));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t variant : {0, 1, 2}) {
    b->Args({variant, 128, 1, 1});                               // 144 KB: L2, compute-bound
    b->Args({variant, 512, 1, 1});                               // 576 KB: L2
    for (int64_t th : {1, 2}) b->Args({variant, 5632, th, 48});  // 311 MB from DRAM
  }
}
BENCHMARK(BM_Q4_0Gemv)->Apply(Args)->ArgNames({"tmac", "n_out", "threads", "copies"})->UseRealTime();

}  // namespace
}  // namespace ferry::proto

BENCHMARK_MAIN();
