// Kernel microbenchmarks: GEMV/GEMM throughput per weight type and ISA (weight bytes/s),
// plus the elementwise kernels and attention. Run: kernels_bench --benchmark_filter=Gemv
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/kv_row.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels {
namespace {

// Weight matrix of type t, [n_out, n_in], quantized from Gaussian data (k-quants: random
// bytes, whose speed does not depend on the values).
std::vector<uint8_t> MakeWeights(DType t, int64_t n_out, int64_t n_in) {
  std::mt19937 rng(1);
  std::vector<uint8_t> w(RowBytes(t, n_in) * n_out);
  if (CanQuantize(t)) {
    std::normal_distribution<float> d(0.f, 0.02f);
    std::vector<float> row(n_in);
    for (int64_t o = 0; o < n_out; ++o) {
      for (auto& v : row) v = d(rng);
      QuantizeRow(t, row.data(), w.data() + o * RowBytes(t, n_in), n_in);
    }
  } else {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
  }
  return w;
}

// Copies of a streamed weight matrix of `bytes` that together exceed any last-level cache
// (256 MiB; a Zen 4 / Zen 5 CCD has 32 MiB of L3, which one 16384 x 2048 q4_0 matrix fits), so
// the calls read DRAM as a model's decode does. 1 for an L2-resident (hot) matrix.
int StreamCopies(size_t bytes, bool streamed) {
  constexpr size_t kStreamBytes = size_t{256} << 20;
  return streamed ? static_cast<int>(std::max<size_t>(1, (kStreamBytes + bytes - 1) / bytes)) : 1;
}

// Times `matmul(copy, x [n_tok, n_in], y [n_tok, n_out], pool)` on Gaussian activations, copy
// cycling through 0..copies-1 (StreamCopies); reports weight bytes/s (weight_bytes per call) and
// tokens/s.
template <typename MatMulFn>
void TimeMatMul(benchmark::State& state, int64_t n_out, int64_t n_in, int64_t n_tok, int threads,
                size_t weight_bytes, int copies, const MatMulFn& matmul) {
  std::vector<float> x(n_in * n_tok), y(n_out * n_tok);
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  ThreadPool pool(threads);
  int copy = 0;
  for (auto _ : state) {
    matmul(copy, x.data(), y.data(), threads > 1 ? &pool : nullptr);
    copy = copy + 1 == copies ? 0 : copy + 1;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight_bytes));
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n_tok), benchmark::Counter::kIsRate);
}

// args: dtype, isa, n_tok, threads, n_out, packed. The default 16384 x 2048 weights,
// in copies past any L3 (StreamCopies), stream from DRAM as decode does; a small n_out
// (L2-resident) measures pure compute. packed = 1 runs MatMulPacked on the weights repacked as
// the model holds them (huge pages), `shift` bytes off their 64-byte alignment (16: every
// 32-byte weight load straddles 16 bytes, half of them a cache line).
void RunMatMul(benchmark::State& state, size_t shift) {
  const auto t = static_cast<DType>(state.range(0));
  const auto isa = static_cast<Isa>(state.range(1));
  const int64_t n_tok = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  if (!ForceIsa(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const int64_t n_out = state.range(4) ? state.range(4) : 16384, n_in = 2048;
  const bool packed = state.range(5) != 0;
  const std::vector<uint8_t> w = MakeWeights(t, n_out, n_in);
  const int copies = StreamCopies(w.size(), state.range(4) == 0);
  if (packed) {
    std::vector<AlignedBuffer> pw;
    const size_t bytes = PackedBytes(t, n_out, n_in);
    for (int c = 0; c < copies; ++c) {
      pw.emplace_back(bytes + shift);
      PackWeights(t, w.data(), n_out, n_in, static_cast<uint8_t*>(pw.back().data()) + shift, nullptr);
    }
    TimeMatMul(state, n_out, n_in, n_tok, threads, bytes, copies,
               [&](int c, const float* x, float* y, ThreadPool* pool) {
                 MatMulPacked(static_cast<const uint8_t*>(pw[static_cast<size_t>(c)].data()) + shift, t,
                              n_out, n_in, x, n_tok, y, pool);
               });
  } else {
    const std::vector<std::vector<uint8_t>> ws(static_cast<size_t>(copies), w);
    TimeMatMul(state, n_out, n_in, n_tok, threads, w.size(), copies,
               [&](int c, const float* x, float* y, ThreadPool* pool) {
                 MatMul(ws[static_cast<size_t>(c)].data(), t, n_out, n_in, x, n_tok, y, pool);
               });
  }
  state.SetLabel(std::string(DTypeName(t)) + (packed ? "/packed/" : "/") + IsaName(isa) +
                 (shift ? "/shift" + std::to_string(shift) : ""));
  ForceIsa(BestSupportedIsa());
}
void BM_MatMul(benchmark::State& state) {
  RunMatMul(state, 0);
}
// The args of BM_MatMul, then the shift.
void BM_PackedShift(benchmark::State& state) {
  RunMatMul(state, static_cast<size_t>(state.range(6)));
}

constexpr Isa kNewIsas[] = {Isa::kAvx2Vnni, Isa::kAvx512, Isa::kAvx512Vnni};

void GemvArgs(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ3_K})
    for (Isa isa : {Isa::kScalar, Isa::kAvx2})
      b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 1, 1, 0, 0});
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kF16})
    b->Args({static_cast<int64_t>(t), static_cast<int64_t>(Isa::kAvx2), 1, 2, 0, 0});
  // The in-place dots of the newer tables (compare with the avx2 rows above).
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    for (Isa isa : kNewIsas) b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 1, 1, 0, 0});
}
BENCHMARK(BM_MatMul)->Name("Gemv")->Apply(GemvArgs)->Unit(benchmark::kMillisecond);

void GemmArgs(benchmark::internal::Benchmark* b) {
  for (DType t :
       {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})  // k-quants: 4-token dot tiles
    for (int64_t n_tok : {8, 32}) {
      b->Args({static_cast<int64_t>(t), static_cast<int64_t>(Isa::kAvx2), n_tok, 2, 0, 0});
      for (Isa isa : kNewIsas) b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), n_tok, 2, 0, 0});
    }
}
void HotArgs(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    for (Isa isa : {Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512, Isa::kAvx512Vnni})
      b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 1, 1, 128, 0});
}
BENCHMARK(BM_MatMul)->Name("GemvHot")->Apply(HotArgs)->Unit(benchmark::kMicrosecond);
// Prefill compute (L2-resident weights, one thread): the in-place dot tiles.
void GemmHotArgs(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    for (Isa isa : {Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512, Isa::kAvx512Vnni})
      b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 32, 1, 128, 0});
}
BENCHMARK(BM_MatMul)->Name("GemmHot")->Apply(GemmHotArgs)->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_MatMul)->Name("Gemm")->Apply(GemmArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

// The SIMD tables, fastest last (each ratio against avx2 comes from one run).
constexpr Isa kSimdIsas[] = {Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512, Isa::kAvx512Vnni};
void PackedArgs(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kI4G128})
    for (int64_t n_tok : {1, 32})
      for (int64_t th : {1, 2})
        for (Isa isa : kSimdIsas)
          b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), n_tok, th, 0, 1});
}
BENCHMARK(BM_MatMul)->Name("Packed")->Apply(PackedArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
void PackedHotArgs(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kI4G128})
    for (int64_t n_tok : {1, 4})
      for (Isa isa : kSimdIsas)
        b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), n_tok, 1, 128, 1});
}
BENCHMARK(BM_MatMul)->Name("PackedHot")->Apply(PackedHotArgs)->Unit(benchmark::kMicrosecond)->UseRealTime();
// What split loads cost this CPU: the 4-token tiles on aligned units and on the same bytes 16
// bytes off (each shift-16 row right after its shift-0 twin, one process).
void PackedShiftArgs(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kI4G128})
    for (Isa isa : kSimdIsas)
      for (int64_t shift : {0, 16})
        b->Args({static_cast<int64_t>(t), static_cast<int64_t>(isa), 4, 1, 128, 1, shift});
}
BENCHMARK(BM_PackedShift)
    ->Name("PackedShift")
    ->Apply(PackedShiftArgs)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The ThreadPool's per-op cost (wake, run an empty slice on each thread, join): tinyllama
// decode runs ~150 matmuls per token through it. Arg: threads.
void BM_ThreadPoolOp(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<int64_t> sink(64);
  for (auto _ : state) {
    pool.ParallelFor(2 * pool.size(), [&](int64_t i0, int64_t) { sink[static_cast<size_t>(i0)] += 1; });
    benchmark::DoNotOptimize(sink.data());
  }
}
BENCHMARK(BM_ThreadPoolOp)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Streaming read bandwidth with the active table's probe loop (what `ferry bench` divides by
// for its efficiency line). Arg: threads; 256 MiB, well past the last-level cache.
void BM_ReadBandwidth(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  double best = 0;
  for (auto _ : state) best = std::max(best, MeasureReadBandwidth(size_t{256} << 20, 1, &pool));
  state.counters["GB/s"] = best / 1e9;
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RmsNorm(benchmark::State& state) {
  std::vector<float> x(state.range(0), 0.5f), w(state.range(0), 1.f), y(state.range(0));
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), y.data(), state.range(0), 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_RmsNorm)->Arg(2048);

void BM_SiluMul(benchmark::State& state) {
  std::vector<float> g(state.range(0), 0.5f), u(state.range(0), 1.f), y(state.range(0));
  for (auto _ : state) {
    SiluMul(g.data(), u.data(), y.data(), state.range(0));
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_SiluMul)->Arg(5632);

// Decode attention: 1 query, 32 heads; args: context, threads, KV type (DType; K and V alike),
// head_dim: 64 with 4 KV heads (tinyllama-1.1b) or 128 with 8 (Llama-3-8B), KV block size (16:
// the paged cache of the serving engine; 4096: one block, as the contiguous cache of `ferry
// bench`). Long contexts split into 256-key chunks (flash-decoding), so 2 threads help at batch 1.
void BM_AttentionDecode(benchmark::State& state) {
  const int n_ctx = static_cast<int>(state.range(0)), bs = static_cast<int>(state.range(4)), nh = 32;
  const int threads = static_cast<int>(state.range(1));
  const auto type = static_cast<DType>(state.range(2));
  const int hd = static_cast<int>(state.range(3)), nkv = hd == 64 ? 4 : 8;
  const int nb = (n_ctx + bs - 1) / bs;
  const size_t row = KvRowBytes(type, hd), n_rows = static_cast<size_t>(nb) * bs * nkv;
  AlignedBuffer k(row * n_rows), v(row * n_rows);  // as the KV pool: huge pages past 2 MiB
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> vals(hd);
  for (size_t r = 0; r < n_rows; ++r)
    for (auto* cache : {&k, &v}) {
      for (float& x : vals) x = d(rng);
      QuantizeRow(type, vals.data(), cache->as<uint8_t>() + r * row, hd);
    }
  std::vector<float> q(nh * hd, 0.3f), out(nh * hd);
  std::vector<int32_t> table(nb);
  for (int i = 0; i < nb; ++i) table[i] = nb - 1 - i;
  const int32_t pos = n_ctx - 1;
  KvBlocks kv{k.data(), v.data(), table.data(), bs};
  kv.k_type = kv.v_type = type;
  ThreadPool pool(threads);
  for (auto _ : state) {
    Attention(q.data(), 1, &pos, nh, nkv, hd, 0.125f, kv, out.data(), threads > 1 ? &pool : nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(DTypeName(type));
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{512, 4096},
                   {1, 2},
                   {static_cast<int64_t>(DType::kF32), static_cast<int64_t>(DType::kF16),
                    static_cast<int64_t>(DType::kQ8_0), static_cast<int64_t>(DType::kQ4_0)},
                   {64, 128},
                   {16, 4096}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Decode attention of a whole model at depth: every layer's own cache (so none stays in L3
// between tokens, as in a real decode step), one query per layer; args: context, threads, shape:
// 0 = tinyllama-1.1b (22 layers, 32 heads / 4 KV heads of 64), 1 = qwen3-0.6b (28 layers, 16 / 8 of
// 128), KV block size (16: the serving engine's paged cache; 4096: `ferry bench`'s contiguous
// one), KV type (DType of K and V). Reports the K/V bytes read per second.
void BM_AttentionDecodeLayers(benchmark::State& state) {
  const int n_ctx = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  const int bs = static_cast<int>(state.range(3));
  const auto type = static_cast<DType>(state.range(4));
  const bool qwen = state.range(2) == 1;
  const int n_layers = qwen ? 28 : 22, nh = qwen ? 16 : 32, nkv = qwen ? 8 : 4, hd = qwen ? 128 : 64;
  const int nb = (n_ctx + bs - 1) / bs;
  const size_t row = KvRowBytes(type, hd), n_rows = static_cast<size_t>(nb) * bs * nkv;
  const size_t bytes = row * n_rows;
  // One layer's rows [n_rows, row] from 1024 random head rows, copied into every layer.
  std::vector<uint8_t> fill(bytes);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> vals(static_cast<size_t>(hd) * 1024);  // [1024, hd]
  for (float& x : vals) x = d(rng);
  for (size_t r = 0; r < n_rows; ++r)
    QuantizeRow(type, vals.data() + (r % 1024) * hd, fill.data() + r * row, hd);
  // As KvStorage lays them out: V's slots start KvValueLead bytes into their buffer.
  const size_t lead = KvValueLead(row * nkv);
  std::vector<AlignedBuffer> k, v;
  for (int l = 0; l < n_layers; ++l) {
    k.emplace_back(bytes);
    v.emplace_back(lead + bytes);
    std::memcpy(k.back().data(), fill.data(), bytes);
    std::memcpy(v.back().as<uint8_t>() + lead, fill.data(), bytes);
  }
  std::vector<float> q(nh * hd, 0.01f), out(nh * hd);
  std::vector<int32_t> table(nb);
  std::iota(table.begin(), table.end(), 0);
  const int32_t pos = n_ctx - 1;
  ThreadPool pool(threads);
  for (auto _ : state) {
    for (int l = 0; l < n_layers; ++l) {
      KvBlocks kv{k[l].data(), v[l].as<uint8_t>() + lead, table.data(), bs};
      kv.k_type = kv.v_type = type;
      Attention(q.data(), 1, &pos, nh, nkv, hd, 0.125f, kv, out.data(), threads > 1 ? &pool : nullptr);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * n_layers *
                          static_cast<int64_t>(bytes));
  state.SetLabel(std::string(qwen ? "qwen3-0.6b " : "tinyllama-1.1b ") + DTypeName(type));
}
BENCHMARK(BM_AttentionDecodeLayers)
    ->ArgsProduct({{4096},
                   {1, 2},
                   {0, 1},
                   {16, 4096},
                   {static_cast<int64_t>(DType::kF32), static_cast<int64_t>(DType::kF16),
                    static_cast<int64_t>(DType::kQ8_0)}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One online-softmax step (dispatch.h attn_softmax) over a key tile of 64 scores, 256 rows
// per iteration (a decode step's rows of one layer at depth 2048): args isa.
void BM_AttnSoftmax(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(0));
  if (isa != Isa::kScalar && !IsaSupported(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const internal::KernelTable& tab = internal::TableFor(isa);
  constexpr int kRows = 256, kTile = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> src(kRows * kTile), s(src.size());
  for (float& x : src) x = d(rng);
  for (auto _ : state) {
    std::memcpy(s.data(), src.data(), s.size() * sizeof(float));
    for (int r = 0; r < kRows; ++r) {
      float m = 1.f, sum;
      benchmark::DoNotOptimize(tab.attn_softmax(s.data() + r * kTile, kTile, kTile, &m, &sum));
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(IsaName(isa));
}
BENCHMARK(BM_AttnSoftmax)
    ->Arg(static_cast<int64_t>(Isa::kScalar))
    ->Arg(static_cast<int64_t>(Isa::kAvx2))
    ->Arg(static_cast<int64_t>(Isa::kAvx512));

// W8A8 MatMul (int8 weights, per-token dynamic int8 activations): args isa, n_tok, threads;
// 16384 x 2048 int8 weights (32 MiB), in copies past any L3 (StreamCopies).
void BM_MatMulW8A8(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(0));
  const int64_t n_tok = state.range(1), n_out = 16384, n_in = 2048;
  const int threads = static_cast<int>(state.range(2));
  if (!ForceIsa(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  std::mt19937 rng(4);
  std::vector<int8_t> w(static_cast<size_t>(n_out * n_in));
  for (auto& b : w) b = static_cast<int8_t>(rng());
  std::vector<float> ws(n_out, 0.01f);
  const int copies = StreamCopies(w.size(), true);
  const std::vector<std::vector<int8_t>> wc(static_cast<size_t>(copies), w);
  TimeMatMul(state, n_out, n_in, n_tok, threads, w.size(), copies,
             [&](int c, const float* x, float* y, ThreadPool* pool) {
               MatMulW8A8(wc[static_cast<size_t>(c)].data(), ws.data(), n_out, n_in, x, n_tok, 0.f, y, pool);
             });
  state.SetLabel(IsaName(isa));
  ForceIsa(BestSupportedIsa());
}
void W8A8Args(benchmark::internal::Benchmark* b) {
  b->Args({static_cast<int64_t>(Isa::kScalar), 1, 1});
  for (Isa isa : kSimdIsas)
    for (const auto& [n_tok, th] : {std::pair<int64_t, int64_t>{1, 1}, {1, 2}, {32, 2}})
      b->Args({static_cast<int64_t>(isa), n_tok, th});
}
BENCHMARK(BM_MatMulW8A8)->Apply(W8A8Args)->Unit(benchmark::kMillisecond)->UseRealTime();

// Random attention inputs: K/V of n_blocks blocks of bs tokens, and n_q queries at the last
// n_q positions of an n_ctx context; the block table is the identity (callers may permute it).
struct AttentionProblem {
  std::vector<float> k, v;          // [n_blocks, bs, nkv, hd]
  std::vector<float> q, out;        // [n_q, nh, hd]
  std::vector<int32_t> table, pos;  // [n_blocks], [n_q]
  AttentionProblem(int n_blocks, int bs, int nkv, int nh, int hd, int n_q, int n_ctx, std::mt19937& rng)
      : k(static_cast<size_t>(n_blocks) * bs * nkv * hd),
        v(k.size()),
        q(static_cast<size_t>(n_q) * nh * hd),
        out(q.size()),
        table(static_cast<size_t>(n_blocks)),
        pos(static_cast<size_t>(n_q)) {
    std::normal_distribution<float> d(0.f, 1.f);
    for (auto* vec : {&k, &v, &q})
      for (auto& x : *vec) x = d(rng);
    for (int i = 0; i < n_blocks; ++i) table[static_cast<size_t>(i)] = i;
    for (int i = 0; i < n_q; ++i) pos[static_cast<size_t>(i)] = n_ctx - n_q + i;
  }
};

// Prefill attention: the last n_q = 64 queries of a context of arg tokens (tinyllama heads),
// tiled online-softmax kernel (threads = range 1) vs the naive reference, which materializes
// each query's n_ctx scores. The tiled kernel's extra memory is O(heads x (64 + head_dim)).
void BM_AttentionPrefill(benchmark::State& state) {
  const int n_ctx = static_cast<int>(state.range(0)), bs = 16, hd = 64, nh = 32, nkv = 4, n_q = 64;
  const bool naive = state.range(1) == 0;
  const int threads = static_cast<int>(state.range(2));
  std::mt19937 rng(3);
  AttentionProblem ap((n_ctx + bs - 1) / bs, bs, nkv, nh, hd, n_q, n_ctx, rng);
  auto& [k, v, q, out, table, pos] = ap;
  KvBlocks kv{k.data(), v.data(), table.data(), bs};
  ThreadPool pool(threads);
  for (auto _ : state) {
    if (naive) {
      ref::AttentionNaive(q.data(), n_q, pos.data(), nh, nkv, hd, 0.125f, kv, out.data());
    } else {
      Attention(q.data(), n_q, pos.data(), nh, nkv, hd, 0.125f, kv, out.data(),
                threads > 1 ? &pool : nullptr);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(naive ? "naive" : "tiled");
}
BENCHMARK(BM_AttentionPrefill)
    ->Args({4096, 0, 1})
    ->Args({4096, 1, 1})
    ->Args({4096, 1, 2})
    ->Args({512, 0, 1})
    ->Args({512, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Query-tiled attention at smollm-135m shapes (9 heads / 3 KV heads, head_dim 64, blocks of
// 16): args mode (0 naive reference, 1 tiled kernel, 2 tiled kernel fed one query per call,
// i.e. no query tile: K/V re-streamed per query), n_q, n_ctx, threads. The queries are the
// last n_q positions of an n_ctx context (n_q = n_ctx: a whole causal prefill).
// Run: kernels_bench --benchmark_filter=AttentionTiles
void BM_AttentionTiles(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0)), n_q = static_cast<int>(state.range(1));
  const int n_ctx = static_cast<int>(state.range(2)), threads = static_cast<int>(state.range(3));
  const int bs = 16, hd = 64, nh = 9, nkv = 3, nb = (n_ctx + bs - 1) / bs;
  std::mt19937 rng(5);
  AttentionProblem ap(nb, bs, nkv, nh, hd, n_q, n_ctx, rng);
  auto& [k, v, q, out, table, pos] = ap;
  std::reverse(table.begin(), table.end());
  KvBlocks kv{k.data(), v.data(), table.data(), bs};
  ThreadPool pool(threads);
  ThreadPool* p = threads > 1 ? &pool : nullptr;
  const int row = nh * hd;
  for (auto _ : state) {
    if (mode == 0) {
      ref::AttentionNaive(q.data(), n_q, pos.data(), nh, nkv, hd, 0.125f, kv, out.data());
    } else if (mode == 1) {
      Attention(q.data(), n_q, pos.data(), nh, nkv, hd, 0.125f, kv, out.data(), p);
    } else {
      for (int t = 0; t < n_q; ++t)
        Attention(q.data() + t * row, 1, &pos[t], nh, nkv, hd, 0.125f, kv, out.data() + t * row, p);
    }
    benchmark::DoNotOptimize(out.data());
  }
  static const char* const kNames[] = {"naive", "tiled", "tiled-1q"};
  state.SetLabel(kNames[mode]);
}
BENCHMARK(BM_AttentionTiles)
    ->Args({0, 512, 4096, 1})
    ->Args({1, 512, 4096, 1})
    ->Args({2, 512, 4096, 1})
    ->Args({1, 512, 4096, 2})
    ->Args({1, 4096, 4096, 1})
    ->Args({1, 4096, 4096, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Batched decode as llama.cc runs it: one Attention call per sequence (1 query each), 32
// sequences of 64 cached keys with shuffled blocks, smollm-135m heads (9 / 3 KV, head_dim 64).
// Args: mode (0 naive, 1 tiled), threads.
void BM_AttentionDecodeBatch(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  const int n_seq = 32, n_ctx = 64, bs = 16, hd = 64, nh = 9, nkv = 3, nb = n_ctx / bs;
  std::mt19937 rng(6);
  // One block pool for all sequences; q, out: [n_seq, nh, hd] (one decode query each).
  AttentionProblem ap(n_seq * nb, bs, nkv, nh, hd, n_seq, n_ctx, rng);
  auto& [k, v, q, out, blocks, unused_pos] = ap;
  std::shuffle(blocks.begin(), blocks.end(), rng);  // [n_seq, nb] block tables
  const int32_t pos = n_ctx - 1;
  ThreadPool pool(threads);
  const int row = nh * hd;
  for (auto _ : state) {
    for (int s = 0; s < n_seq; ++s) {
      KvBlocks kv{k.data(), v.data(), blocks.data() + s * nb, bs};
      if (mode == 0) {
        ref::AttentionNaive(q.data() + s * row, 1, &pos, nh, nkv, hd, 0.125f, kv, out.data() + s * row);
      } else {
        Attention(q.data() + s * row, 1, &pos, nh, nkv, hd, 0.125f, kv, out.data() + s * row,
                  threads > 1 ? &pool : nullptr);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(mode == 0 ? "naive" : "tiled");
}
BENCHMARK(BM_AttentionDecodeBatch)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace ferry::kernels

BENCHMARK_MAIN();
