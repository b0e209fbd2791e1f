// Query-tiled attention and its micro-kernels (dispatch.h attn_scores / attn_pv / attn_pv_int): each ISA's
// micro-kernels against the scalar truth with a row's bits independent of the rows beside it,
// and Attention against the naive reference over ragged shapes (n_q not a multiple of the
// query tile, head_dim 64/80/128, keys not a multiple of the key tile, shuffled blocks, GQA
// 1/3/4/8), bit-identical however the queries are split into calls and whatever the threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {
namespace {

// n rows of head_dim values stored as `type`, `stride` bytes apart (stride > the row: rows not
// contiguous; an even pad, as in the KV pool, whose 2-byte values and scales stay 2-byte
// aligned), and their values as floats (what the kernels must read: KvValue).
struct Rows {
  std::vector<uint8_t> data;
  std::vector<float> values;  // [n, head_dim] dequantized
  int64_t stride;
  int head_dim;
  const uint8_t* row(int i) const { return data.data() + i * stride; }
  float value(int i, int d) const { return values[static_cast<size_t>(i) * head_dim + d]; }
};
Rows RandomRows(std::mt19937& rng, DType type, int n, int head_dim, int pad) {
  const int64_t row_bytes = static_cast<int64_t>(KvRowBytes(type, head_dim));
  Rows r{std::vector<uint8_t>(static_cast<size_t>(n * (row_bytes + pad) + 8), 0xAB),
         std::vector<float>(static_cast<size_t>(n) * head_dim), row_bytes + pad, head_dim};
  for (int i = 0; i < n; ++i) {
    const std::vector<float> x = testing::RandomFloats(rng, head_dim);
    QuantizeRow(type, x.data(), r.data.data() + i * r.stride, head_dim);
    DequantizeRow(type, r.row(i), r.values.data() + static_cast<size_t>(i) * head_dim, head_dim);
  }
  return r;
}

// Head dims each type can store: q8_0/q4_0 whole blocks of 32; the others any (ragged tails).
std::vector<int> HeadDims(DType type) {
  if (Traits(type).block_size == 32) return {32, 64, 96, 128, 576};  // 576: MLA's K rows
  return {8, 33, 64, 80, 100, 128};
}

TEST(AttentionMicroKernels, MatchScalarTruthAndRowsAreIndependentForEveryKvType) {
  std::mt19937 rng(50);
  std::uniform_int_distribution<int> rows_d(1, 13), keys_d(1, 64);
  const internal::KernelTable& scalar = internal::TableFor(Isa::kScalar);
  for (Isa isa : testing::TestIsas()) {
    const internal::KernelTable& tab = internal::TableFor(isa);
    for (DType type : kKvTypes) {
      const int ti = static_cast<int>(type);
      for (int hd : HeadDims(type)) {
        for (int rep = 0; rep < 4; ++rep) {
          const int nr = rows_d(rng), nk = keys_d(rng), ld = 67;
          SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " hd=" + std::to_string(hd) +
                       " rows=" + std::to_string(nr) + " keys=" + std::to_string(nk));
          const std::vector<float> qd = testing::RandomFloats(rng, static_cast<int64_t>(nr) * (hd + 3));
          const Rows k = RandomRows(rng, type, nk, hd, 6), v = RandomRows(rng, type, nk, hd, 10);
          // The query rows in the K type's form, and the values its scores multiply: the f32
          // row, or for q8_0 / q4_0 K the row rounded to q8_0 (ref::QueryAsRead).
          const size_t qb = internal::AttnQueryBytes(type, hd);
          std::vector<std::byte> qf(nr * qb);
          std::vector<const void*> qp(nr);
          std::vector<float> qv(static_cast<size_t>(nr) * hd);
          for (int r = 0; r < nr; ++r) {
            const float* x = qd.data() + static_cast<int64_t>(r) * (hd + 3);
            qp[r] = internal::PrepareAttnQuery(scalar, type, x, hd, qf.data() + r * qb);
            const std::vector<float> read = ref::QueryAsRead(type, x, hd);
            std::copy(read.begin(), read.end(), qv.begin() + static_cast<int64_t>(r) * hd);
          }
          // Scores: all rows at once, each row alone, and the scalar truth.
          std::vector<float> s(static_cast<size_t>(nr) * ld, -1.f), s1(s.size(), -1.f), want(s.size(), -1.f);
          const float scale = 0.125f;
          tab.attn_scores[ti](qp.data(), nr, k.row(0), k.stride, nk, hd, scale, s.data(), ld);
          scalar.attn_scores[ti](qp.data(), nr, k.row(0), k.stride, nk, hd, scale, want.data(), ld);
          for (int r = 0; r < nr; ++r)
            tab.attn_scores[ti](&qp[r], 1, k.row(0), k.stride, nk, hd, scale, &s1[r * ld], ld);
          for (int r = 0; r < nr; ++r) {
            for (int j = 0; j < ld; ++j) {
              if (j >= nk) {
                ASSERT_EQ(s[r * ld + j], -1.f) << "wrote past n_keys";
                continue;
              }
              double mag = 0, exact = 0;  // the dot's rounding scale, and the dot in double
              for (int d = 0; d < hd; ++d) {
                mag += std::fabs(static_cast<double>(qv[r * hd + d]) * k.value(j, d));
                exact += static_cast<double>(qv[r * hd + d]) * k.value(j, d);
              }
              if (internal::AttnQueryIsQ8(type)) {  // integer block dots: every table the scalar's bits
                ASSERT_EQ(s[r * ld + j], want[r * ld + j]) << r << "," << j;
              } else {
                ASSERT_NEAR(s[r * ld + j], want[r * ld + j], 1e-6 * mag * scale + 1e-7) << r << "," << j;
              }
              ASSERT_NEAR(want[r * ld + j], exact * scale, 1e-6 * mag * scale + 1e-7) << r << "," << j;
            }
          }
          ASSERT_EQ(0, std::memcmp(s.data(), s1.data(), s.size() * 4));
          // P.V into accumulators that already hold values; some p exactly 0 (masked keys).
          std::vector<float> p = testing::RandomFloats(rng, static_cast<int64_t>(nr) * ld);
          for (auto& x : p) x = std::fabs(x) < 0.3f ? 0.f : std::fabs(x);
          const std::vector<float> acc0 = testing::RandomFloats(rng, static_cast<int64_t>(nr) * hd);
          std::vector<float> acc = acc0, acc1 = acc0, acc_want = acc0;
          auto ptrs = [&](std::vector<float>& a) {
            std::vector<float*> out(nr);
            for (int r = 0; r < nr; ++r) out[r] = a.data() + static_cast<int64_t>(r) * hd;
            return out;
          };
          auto pa = ptrs(acc), pa1 = ptrs(acc1), pw = ptrs(acc_want);
          tab.attn_pv[ti](p.data(), ld, nr, v.row(0), v.stride, nk, hd, pa.data());
          scalar.attn_pv[ti](p.data(), ld, nr, v.row(0), v.stride, nk, hd, pw.data());
          for (int r = 0; r < nr; ++r)
            tab.attn_pv[ti](&p[r * ld], ld, 1, v.row(0), v.stride, nk, hd, &pa1[r]);
          for (int r = 0; r < nr; ++r) {
            for (int d = 0; d < hd; ++d) {
              double mag = std::fabs(acc0[r * hd + d]), exact = acc0[r * hd + d];
              for (int j = 0; j < nk; ++j) {
                mag += std::fabs(static_cast<double>(p[r * ld + j]) * v.value(j, d));
                exact += static_cast<double>(p[r * ld + j]) * v.value(j, d);
              }
              ASSERT_NEAR(acc[r * hd + d], acc_want[r * hd + d], 1e-6 * mag + 1e-7) << r << "," << d;
              ASSERT_NEAR(acc_want[r * hd + d], exact, 1e-6 * mag + 1e-7) << r << "," << d;
            }
          }
          ASSERT_EQ(0, std::memcmp(acc.data(), acc1.data(), acc.size() * 4));
        }
      }
    }
  }
}

TEST(AttentionMicroKernels, ZeroWeightLeavesAccumulatorBitIdentical) {
  // A key past a query's position gets p = 0 inside a shared tile: no bit of acc may change.
  std::mt19937 rng(51);
  for (Isa isa : testing::TestIsas()) {
    const internal::KernelTable& tab = internal::TableFor(isa);
    for (DType type : kKvTypes) {
      const int hd = 96, nk = 9;
      const Rows v = RandomRows(rng, type, nk, hd, 0);
      const std::vector<float> p(nk, 0.f);
      std::vector<float> acc = testing::RandomFloats(rng, hd);
      acc[3] = 0.f;
      const std::vector<float> before = acc;
      float* pa = acc.data();
      tab.attn_pv[static_cast<int>(type)](p.data(), nk, 1, v.row(0), v.stride, nk, hd, &pa);
      ASSERT_EQ(0, std::memcmp(acc.data(), before.data(), acc.size() * 4))
          << IsaName(isa) << " " << DTypeName(type);
    }
  }
}

// attn_pv_int (q8_0 / q4_0 V, dispatch.h): V rows reached through pointers in any order (a key
// tile gathered across KV blocks), every table the scalar twin's bits, a row's bits the same
// alone; the twin within its int16 rounding of the exact sum: each weight off by at most half
// of m / 32767 (m = the row's largest |p_j d_j| in the block), each output by that times
// sum_j |q_j|, plus float slack. Rows of zeros, or of weights below kAttnPvIntMinWeight, leave
// acc's bits as they were; p past n_keys is never read (NaN there).
TEST(AttentionMicroKernels, IntegerPvIsTheScalarTwinsBitsAndWithinItsInt16Rounding) {
  std::mt19937 rng(56);
  std::uniform_int_distribution<int> rows_d(1, 13), keys_d(1, internal::kAttnPvIntMaxKeys);
  const internal::KernelTable& scalar = internal::TableFor(Isa::kScalar);
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const int ti = static_cast<int>(type);
    for (int hd : HeadDims(type)) {
      for (int rep = 0; rep < 6; ++rep) {
        const int nr = rows_d(rng), ld = 67;
        const int nk = rep == 0 ? internal::kAttnPvIntMaxKeys : rep == 1 ? 1 : keys_d(rng);
        SCOPED_TRACE(std::string(DTypeName(type)) + " hd=" + std::to_string(hd) +
                     " rows=" + std::to_string(nr) + " keys=" + std::to_string(nk));
        const Rows v = RandomRows(rng, type, 2 * nk, hd, 6);
        std::vector<int> pick(2 * nk);  // nk of the rows, scattered and out of order
        std::iota(pick.begin(), pick.end(), 0);
        std::shuffle(pick.begin(), pick.end(), rng);
        std::vector<const uint8_t*> vp(nk);
        for (int j = 0; j < nk; ++j) vp[j] = v.row(pick[j]);
        std::vector<float> p(static_cast<size_t>(nr) * ld, std::numeric_limits<float>::quiet_NaN());
        for (int r = 0; r < nr; ++r)
          for (int j = 0; j < nk; ++j) {
            const float x = std::fabs(testing::RandomFloats(rng, 1)[0]);
            p[r * ld + j] = r == 1     ? 0.f
                            : r == 2   ? 1e-33f * x
                            : x < 0.3f ? 0.f
                                       : x;  // row 1 zeros, row 2 tiny
          }
        const std::vector<float> acc0 = testing::RandomFloats(rng, static_cast<int64_t>(nr) * hd);
        std::vector<float> want = acc0;
        std::vector<float*> pw(nr);
        for (int r = 0; r < nr; ++r) pw[r] = want.data() + static_cast<int64_t>(r) * hd;
        scalar.attn_pv_int[ti](p.data(), ld, nr, vp.data(), nk, hd, pw.data());
        for (Isa isa : testing::TestIsas()) {
          SCOPED_TRACE(IsaName(isa));
          const internal::KernelTable& tab = internal::TableFor(isa);
          ASSERT_NE(tab.attn_pv_int[ti], nullptr);
          std::vector<float> acc = acc0, acc1 = acc0;
          std::vector<float*> pa(nr), pa1(nr);
          for (int r = 0; r < nr; ++r) {
            pa[r] = acc.data() + static_cast<int64_t>(r) * hd;
            pa1[r] = acc1.data() + static_cast<int64_t>(r) * hd;
          }
          tab.attn_pv_int[ti](p.data(), ld, nr, vp.data(), nk, hd, pa.data());
          for (int r = 0; r < nr; ++r) tab.attn_pv_int[ti](&p[r * ld], ld, 1, vp.data(), nk, hd, &pa1[r]);
          ASSERT_EQ(0, std::memcmp(acc.data(), want.data(), acc.size() * 4));
          ASSERT_EQ(0, std::memcmp(acc1.data(), want.data(), acc.size() * 4));
        }
        for (int r = 0; r < nr; ++r) {
          if (r == 1 || r == 2) {  // nothing added: the bits of acc0
            ASSERT_EQ(0, std::memcmp(&want[r * hd], &acc0[r * hd], static_cast<size_t>(hd) * 4)) << r;
            continue;
          }
          for (int b = 0; b < hd / 32; ++b) {
            double m = 0;  // the row's largest |p_j d_j| in block b
            for (int j = 0; j < nk; ++j) {
              uint16_t h;
              std::memcpy(&h, vp[j] + b * RowBytes(type, 32), 2);
              m = std::max(m, std::fabs(static_cast<double>(p[r * ld + j]) * Fp16ToFp32(h)));
            }
            for (int d = 32 * b; d < 32 * b + 32; ++d) {
              double exact = acc0[r * hd + d], mag = std::fabs(acc0[r * hd + d]), sum_q = 0;
              for (int j = 0; j < nk; ++j) {
                const float vd = v.value(pick[j], d);
                exact += static_cast<double>(p[r * ld + j]) * vd;
                mag += std::fabs(static_cast<double>(p[r * ld + j]) * vd);
                uint16_t h;
                std::memcpy(&h, vp[j] + b * RowBytes(type, 32), 2);
                if (Fp16ToFp32(h) != 0.f) sum_q += std::fabs(vd / Fp16ToFp32(h));  // |q_j[d]|, exact
              }
              const double rounding = 0.5 * m * (1 + 1e-6) / internal::kAttnPvIntLevels * sum_q;
              ASSERT_NEAR(want[r * hd + d], exact, rounding + 1e-6 * mag + 1e-7) << r << "," << d;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionMicroKernels, SoftmaxStepMatchesScalarTruth) {
  std::mt19937 rng(54);
  std::uniform_int_distribution<int> n_d(1, 64);
  const internal::KernelTable& scalar = internal::TableFor(Isa::kScalar);
  for (Isa isa : testing::TestIsas()) {
    const internal::KernelTable& tab = internal::TableFor(isa);
    for (int rep = 0; rep < 40; ++rep) {
      const int n = n_d(rng), n_tile = 64;
      SCOPED_TRACE(std::string(IsaName(isa)) + " n=" + std::to_string(n) + " rep=" + std::to_string(rep));
      std::vector<float> s = testing::RandomFloats(rng, n_tile, 3.f);
      // Keys before a sliding window come as -inf (ShapeScores) and must get p = 0 exactly.
      const int n_masked = rep % 4 == 3 ? (rep / 4) % n : 0;
      std::fill(s.begin(), s.begin() + n_masked, -std::numeric_limits<float>::infinity());
      std::vector<float> s_want = s;
      // The running max: none yet, below the tile's max, or above it (no rescale: c = 1).
      const float m0 = rep % 3 == 0 ? -std::numeric_limits<float>::infinity() : (rep % 3 == 1 ? -1.f : 20.f);
      float m = m0, m_want = m0, sum = -1.f, sum_want = -1.f;
      const float c = tab.attn_softmax(s.data(), n, n_tile, &m, &sum);
      const float c_want = scalar.attn_softmax(s_want.data(), n, n_tile, &m_want, &sum_want);
      ASSERT_EQ(m, m_want);  // a max is exact
      ASSERT_NEAR(c, c_want, 1e-6f * c_want);
      if (rep % 3 == 0) {
        ASSERT_EQ(c, 0.f);
      } else if (rep % 3 == 2) {
        ASSERT_EQ(c, 1.f);
      }
      ASSERT_NEAR(sum, sum_want, 1e-5f * sum_want + 1e-30f);
      for (int j = 0; j < n_masked; ++j) ASSERT_EQ(s[j], 0.f) << j;
      for (int j = 0; j < n; ++j) ASSERT_NEAR(s[j], s_want[j], 1e-6f * s_want[j] + 1e-30f) << j;
      for (int j = n; j < n_tile; ++j) ASSERT_EQ(s[j], 0.f) << j;
    }
  }
}

struct Shape {
  int n_heads, n_kv_heads, head_dim, block_size, n_ctx, n_q;
};

// A random cache of `s` with physical blocks shuffled (and unused ones between them), stored
// as `type`; k32/v32 keep the f32 values it was quantized from.
struct Cache {
  std::vector<int32_t> table;
  std::vector<uint8_t> k, v;    // [n_phys, block_size, n_kv_heads, head row of `type`]
  std::vector<float> k32, v32;  // [n_phys, block_size, n_kv_heads, head_dim] before rounding
  int block_size;
  DType type;
  KvBlocks kv() const {
    return KvBlocks{k.data(), v.data(), table.data(), block_size, nullptr, nullptr, type, type};
  }
  KvBlocks kv_f32() const { return KvBlocks{k32.data(), v32.data(), table.data(), block_size}; }
};
Cache RandomCache(std::mt19937& rng, const Shape& s, DType type = DType::kF32) {
  Cache c;
  c.block_size = s.block_size;
  c.type = type;
  const int used = (s.n_ctx + s.block_size - 1) / s.block_size, n_phys = used + 2;
  std::vector<int32_t> perm(n_phys);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.table.assign(perm.begin(), perm.begin() + used);
  const int64_t rows = static_cast<int64_t>(n_phys) * s.block_size * s.n_kv_heads;
  c.k32 = testing::RandomFloats(rng, rows * s.head_dim);
  c.v32 = testing::RandomFloats(rng, rows * s.head_dim);
  const size_t rb = KvRowBytes(type, s.head_dim);
  c.k.resize(rows * rb);
  c.v.resize(rows * rb);
  for (int64_t r = 0; r < rows; ++r) {  // per token, per head, as the cache writes them
    QuantizeRow(type, c.k32.data() + r * s.head_dim, c.k.data() + r * rb, s.head_dim);
    QuantizeRow(type, c.v32.data() + r * s.head_dim, c.v.data() + r * rb, s.head_dim);
  }
  return c;
}

// A random cache of `s` and s.n_q random queries at its last n_q positions in order (a prefill
// chunk; one query: a decode step).
struct Problem {
  Cache cache;
  std::vector<float> q;      // [n_q, n_heads, head_dim]
  std::vector<int32_t> pos;  // [n_q]
};
Problem RandomProblem(std::mt19937& rng, const Shape& s, DType type) {
  Problem p{RandomCache(rng, s, type), {}, std::vector<int32_t>(s.n_q)};
  p.q = testing::RandomFloats(rng, static_cast<int64_t>(s.n_q) * s.n_heads * s.head_dim);
  for (int t = 0; t < s.n_q; ++t) p.pos[t] = s.n_ctx - s.n_q + t;
  return p;
}

// The naive reference attention over `naive_kv` (want) and Attention over the problem's own cache
// (got), at the usual 1 / sqrt(head_dim) scale.
struct WantGot {
  std::vector<float> want, got;  // [n_q, n_heads, head_dim] each
  std::vector<float> pv_int;     // [n_q, n_heads, head_dim] ref.h AttentionNaive's integer P.V bound
};
float ScaleOf(const Shape& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}
WantGot NaiveAndTiled(const Problem& p, const Shape& s, const KvBlocks& naive_kv, ThreadPool* pool) {
  WantGot r{std::vector<float>(p.q.size()), std::vector<float>(p.q.size()), std::vector<float>(p.q.size())};
  ref::AttentionNaive(p.q.data(), s.n_q, p.pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, ScaleOf(s),
                      naive_kv, r.want.data(), r.pv_int.data());
  Attention(p.q.data(), s.n_q, p.pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, ScaleOf(s), p.cache.kv(),
            r.got.data(), pool);
  return r;
}

// Calls f(isa, type, shape) with each ISA table this CPU runs switched in, for every KV type
// and every shape whose head_dim that type can store; stops at the first fatal failure.
template <typename F>
void ForEachTableTypeShape(std::span<const Shape> shapes, F&& f) {
  testing::ScopedIsa isa_guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (DType type : kKvTypes)
      for (const Shape& s : shapes) {
        if (!KvTypeFits(type, s.head_dim)) continue;
        f(isa, type, s);
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
}

TEST(AttentionQueryTiles, MatchNaiveOnRaggedShapes) {
  std::mt19937 rng(52);
  ThreadPool pool(2);
  // n_q not a multiple of the query tile; n_ctx not a multiple of 64 or the block size;
  // GQA groups 1, 3, 4, 8.
  const Shape shapes[] = {{4, 4, 64, 16, 83, 13},  {9, 3, 64, 16, 150, 11}, {8, 2, 80, 48, 301, 21},
                          {16, 2, 128, 32, 97, 9}, {6, 2, 40, 8, 37, 37},   {8, 1, 64, 64, 600, 19},
                          {8, 4, 96, 16, 70, 7}};
  ForEachTableTypeShape(shapes, [&](Isa isa, DType type, const Shape& s) {
    SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " heads=" + std::to_string(s.n_heads) +
                 "/" + std::to_string(s.n_kv_heads) + " hd=" + std::to_string(s.head_dim) +
                 " n_q=" + std::to_string(s.n_q));
    const Problem pr = RandomProblem(rng, s, type);
    const auto [want, got, pv_int] = NaiveAndTiled(pr, s, pr.cache.kv(), &pool);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 3e-5f + pv_int[i]) << i;
  });
}

TEST(AttentionQueryTiles, BitIdenticalWhateverTheSplitOfQueriesAndThreads) {
  std::mt19937 rng(53);
  ThreadPool pool2(2), pool3(3);
  const Shape shapes[] = {
      {9, 3, 64, 16, 700, 23}, {8, 1, 80, 48, 130, 17}, {4, 4, 128, 32, 90, 10}, {8, 2, 96, 16, 300, 9}};
  ForEachTableTypeShape(shapes, [&](Isa isa, DType type, const Shape& s) {
    SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " hd=" + std::to_string(s.head_dim));
    const Cache c = RandomCache(rng, s, type);
    const int row = s.n_heads * s.head_dim;
    const auto q = testing::RandomFloats(rng, static_cast<int64_t>(s.n_q) * row);
    // Positions of a prefill chunk, but shuffled: a tile's queries end at different keys
    // and chunks, not in order.
    std::vector<int32_t> pos(s.n_q);
    for (int t = 0; t < s.n_q; ++t) pos[t] = s.n_ctx - s.n_q + t;
    std::shuffle(pos.begin(), pos.end(), rng);
    pos[1] = 5;  // one query far behind the others (fewer chunks than its tile)
    const float scale = 0.11f;
    std::vector<float> all(q.size());
    Attention(q.data(), s.n_q, pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, scale, c.kv(), all.data(),
              nullptr);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      for (int chunk : {1, 2, 3, 5, s.n_q}) {
        std::vector<float> got(q.size());
        for (int t0 = 0; t0 < s.n_q; t0 += chunk) {
          const int n = std::min(chunk, s.n_q - t0);
          Attention(q.data() + static_cast<int64_t>(t0) * row, n, pos.data() + t0, s.n_heads, s.n_kv_heads,
                    s.head_dim, scale, c.kv(), got.data() + static_cast<int64_t>(t0) * row, pool);
        }
        ASSERT_EQ(0, std::memcmp(got.data(), all.data(), all.size() * 4))
            << "chunk " << chunk << " threads " << (pool ? pool->size() : 1);
      }
    }
  });
}

// The same keys and values stored in blocks of another size, the blocks shuffled: slot bytes
// (n_kv_heads rows of `type`) copied position by position.
Cache Relayout(std::mt19937& rng, const Cache& src, const Shape& s, int block_size) {
  Shape t = s;
  t.block_size = block_size;
  Cache c = RandomCache(rng, t, src.type);  // the shuffled table and buffers of the new size
  const size_t slot = KvRowBytes(src.type, s.head_dim) * s.n_kv_heads;
  for (int p = 0; p < s.n_ctx; ++p) {
    const size_t from =
        (static_cast<size_t>(src.table[p / s.block_size]) * s.block_size + p % s.block_size) * slot;
    const size_t to = (static_cast<size_t>(c.table[p / block_size]) * block_size + p % block_size) * slot;
    std::memcpy(c.k.data() + to, src.k.data() + from, slot);
    std::memcpy(c.v.data() + to, src.v.data() + from, slot);
  }
  return c;
}

// Key tiles fall at multiples of 64 keys whatever the KV block size, so a paged cache (blocks of
// 16) and a contiguous one (one block per sequence) give the same bits: decode (one query, the
// split schedule with 2 threads) and a prefill chunk, with and without a sliding window (whose
// blocks before every query's window are never read).
TEST(AttentionQueryTiles, BitIdenticalWhateverTheKvBlockSize) {
  std::mt19937 rng(54);
  ThreadPool pool2(2);
  const Shape shapes[] = {{32, 4, 64, 64, 700, 1}, {8, 2, 128, 64, 300, 9}, {6, 2, 40, 64, 150, 5}};
  ForEachTableTypeShape(shapes, [&](Isa isa, DType type, const Shape& s) {
    const auto [c, q, pos] = RandomProblem(rng, s, type);
    for (int window : {0, 100}) {
      const AttentionVariant variant{window};
      std::vector<float> want(q.size());
      Attention(q.data(), s.n_q, pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, 0.11f, c.kv(), want.data(),
                &pool2, variant);
      for (int bs : {1, 5, 16, 48, 100, 1024}) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " hd=" + std::to_string(s.head_dim) +
                     " window=" + std::to_string(window) + " block_size=" + std::to_string(bs));
        Cache other = Relayout(rng, c, s, bs);
        // Blocks wholly before every query's window may be freed (a sliding layer's are):
        // their table entries point far outside the cache, so reading one faults.
        const int lo = window > 0 ? std::max(0, pos[0] + 1 - window) : 0;
        for (int b = 0; (b + 1) * bs <= lo; ++b) other.table[b] = 1 << 28;
        std::vector<float> got(q.size());
        Attention(q.data(), s.n_q, pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, 0.11f, other.kv(),
                  got.data(), &pool2, variant);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
      }
    }
  });
}

// A sliding window over each KV type against the naive attention over the window's keys alone:
// the cache laid out in blocks of one token, the naive reference reads it through a block table
// that starts at the window's first key (positions shifted to match). Tiles keep their absolute
// places in the windowed run, so the first key tile starts before the window (masked keys).
TEST(AttentionQueryTiles, SlidingWindowMatchesNaiveOverTheWindowsKeys) {
  std::mt19937 rng(57);
  ThreadPool pool2(2);
  const Shape shapes[] = {{8, 2, 64, 16, 400, 6}, {32, 4, 64, 16, 700, 1}};
  ForEachTableTypeShape(shapes, [&](Isa isa, DType type, const Shape& s) {
    const auto [c, q, pos] = RandomProblem(rng, s, type);
    const Cache one = Relayout(rng, c, s, 1);
    const int64_t row = static_cast<int64_t>(s.n_heads) * s.head_dim;
    for (int window : {37, 100, 300}) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " n_q=" + std::to_string(s.n_q) +
                   " window=" + std::to_string(window));
      std::vector<float> got(q.size());
      Attention(q.data(), s.n_q, pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, ScaleOf(s), one.kv(),
                got.data(), &pool2, AttentionVariant{window});
      for (int t = 0; t < s.n_q; ++t) {
        const int lo = std::max(0, pos[t] + 1 - window);
        KvBlocks view = one.kv();
        view.block_table = one.table.data() + lo;
        const int32_t shifted = pos[t] - lo;
        std::vector<float> want(row), pv_int(row);
        ref::AttentionNaive(q.data() + t * row, 1, &shifted, s.n_heads, s.n_kv_heads, s.head_dim, ScaleOf(s),
                            view, want.data(), pv_int.data());
        for (int64_t i = 0; i < row; ++i)
          ASSERT_NEAR(got[t * row + i], want[i], 3e-5f + pv_int[i]) << t << "," << i;
      }
    }
  });
}

// Attention over a cache stored as each KV type against the f32 attention of the values it
// was rounded from, within what that rounding allows: with every score of a row off by at most
// D = scale * sum_d |q^_d k^_d - q_d k_d| (the rows' own rounding errors; q^ = q but for q8_0
// and q4_0 K, whose scores read the query rounded to q8_0), the weights move by a
// factor within exp(+-2D), so |o^ - o| <= max_j |v^_j - v_j| + (exp(2D) - 1) * max_j |v_j|,
// plus float slack and, for q8_0 / q4_0 V, the integer P.V's int16 rounding (ref.h
// AttentionNaive's bound over the stored cache).
TEST(AttentionKvTypes, WithinTheirRoundingOfTheF32Attention) {
  std::mt19937 rng(55);
  ThreadPool pool(2);
  const Shape shapes[] = {{8, 2, 64, 16, 300, 5}, {4, 4, 32, 32, 90, 3}, {6, 2, 128, 16, 41, 41}};
  ForEachTableTypeShape(shapes, [&](Isa isa, DType type, const Shape& s) {
    SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " hd=" + std::to_string(s.head_dim));
    const Problem pr = RandomProblem(rng, s, type);
    const auto& [c, q, pos] = pr;
    const auto [want, got, pv_int_f32] = NaiveAndTiled(pr, s, c.kv_f32(), &pool);
    std::vector<float> own(q.size()), pv_int(q.size());
    ref::AttentionNaive(q.data(), s.n_q, pos.data(), s.n_heads, s.n_kv_heads, s.head_dim, ScaleOf(s), c.kv(),
                        own.data(), pv_int.data());
    const float scale = ScaleOf(s);
    const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
    std::vector<float> kq(hd), vq(hd);
    const size_t rb = KvRowBytes(type, hd);
    for (int t = 0; t < s.n_q; ++t)
      for (int h = 0; h < s.n_heads; ++h) {
        const float* qv = q.data() + (static_cast<int64_t>(t) * s.n_heads + h) * hd;
        const std::vector<float> qr = ref::QueryAsRead(type, qv, hd);  // the query the scores read
        double D = 0, ev = 0, vmax = 0;
        for (int p = 0; p <= pos[t]; ++p) {
          const int64_t row =
              (static_cast<int64_t>(c.table[p / s.block_size]) * s.block_size + p % s.block_size) *
                  s.n_kv_heads +
              h / group;
          DequantizeRow(type, c.k.data() + row * rb, kq.data(), hd);
          DequantizeRow(type, c.v.data() + row * rb, vq.data(), hd);
          double dk = 0;
          for (int d = 0; d < hd; ++d) {
            dk += std::fabs(static_cast<double>(qr[d]) * kq[d] -
                            static_cast<double>(qv[d]) * c.k32[row * hd + d]);
            ev = std::max(ev, static_cast<double>(std::fabs(vq[d] - c.v32[row * hd + d])));
            vmax = std::max(vmax, static_cast<double>(std::fabs(c.v32[row * hd + d])));
          }
          D = std::max(D, dk * scale);
        }
        const double bound = ev + std::expm1(2 * D) * vmax + 3e-5;
        for (int d = 0; d < hd; ++d) {
          const size_t i = (static_cast<size_t>(t) * s.n_heads + h) * hd + d;
          ASSERT_LE(std::fabs(got[i] - want[i]), bound + pv_int[i]) << "t=" << t << " h=" << h << " d=" << d;
        }
      }
  });
}

}  // namespace
}  // namespace ferry::kernels
