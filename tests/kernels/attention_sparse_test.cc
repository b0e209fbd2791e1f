// AttentionSparse (value-fetch skipping, progressive precision, pruned heads) against its
// scalar reference on every ISA, over GQA, shuffled ragged blocks, ragged head_dim and
// contexts spanning several 256-key chunks; counts exact; the skipping error bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {
namespace {

// A KV cache of random rows in shuffled physical blocks, with its INT8 key copy.
struct Cache {
  int n_kv, hd, bs;
  std::vector<int32_t> table;
  std::vector<float> k, v, k_scale;  // [n_phys, bs, n_kv, hd] x2, [n_phys, bs, n_kv]
  std::vector<int8_t> k_i8;          // [n_phys, bs, n_kv, hd]
  Cache(std::mt19937& rng, int n_kv_, int hd_, int bs_, int n_ctx, float k_sigma)
      : n_kv(n_kv_), hd(hd_), bs(bs_) {
    const int used = (n_ctx + bs - 1) / bs, n_phys = used + 2;
    std::vector<int32_t> perm(static_cast<size_t>(n_phys));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    table.assign(perm.begin(), perm.begin() + used);
    const int64_t rows = int64_t{n_phys} * bs * n_kv;
    k = testing::RandomFloats(rng, rows * hd, k_sigma);
    v = testing::RandomFloats(rng, rows * hd, 1.f);
    k_i8.resize(k.size());
    k_scale.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      k_scale[r] = QuantizeActInt8(k.data() + r * hd, hd, 0.f, k_i8.data() + r * hd);
  }
  KvBlocks View() const {
    return KvBlocks{k.data(), v.data(), table.data(), bs, k_i8.data(), k_scale.data()};
  }
};

struct Shape {
  int n_heads, n_kv, hd, bs, n_ctx, n_q;
  float k_sigma;  // larger: peakier softmax, more skipping
};

// sh.n_q random queries at the cache's last positions (in reverse order) and their scale.
struct Queries {
  std::vector<float> q;      // [n_q, n_heads, hd]
  std::vector<int32_t> pos;  // [n_q]
  float scale;
  Queries(std::mt19937& rng, const Shape& sh)
      : q(testing::RandomFloats(rng, int64_t{sh.n_q} * sh.n_heads * sh.hd, 1.f)),
        pos(static_cast<size_t>(sh.n_q)),
        scale(1.0f / std::sqrt(static_cast<float>(sh.hd))) {
    for (int t = 0; t < sh.n_q; ++t) pos[static_cast<size_t>(t)] = sh.n_ctx - 1 - t;
  }
};

// The scalar reference's outputs and counts.
struct Reference {
  std::vector<float> out;
  AttentionSparseCounts n;
};
Reference RunReference(const Queries& qs, const Shape& sh, const KvBlocks& kv, const AttentionSparsity& sp) {
  Reference r{std::vector<float>(qs.q.size()), {}};
  ref::AttentionSparseNaive(qs.q.data(), sh.n_q, qs.pos.data(), sh.n_heads, sh.n_kv, sh.hd, qs.scale, kv, sp,
                            r.out.data(), &r.n, nullptr);
  return r;
}

std::vector<AttentionSparsity> Options() {
  std::vector<AttentionSparsity> v;
  for (float t : {0.f, 1e-4f, 2e-3f, 0.05f}) v.push_back({t, false, 0.f, nullptr});
  for (float m : {1.f, 4.f}) v.push_back({0.f, true, m, nullptr});
  v.push_back({2e-3f, true, 3.f, nullptr});
  return v;
}

TEST(AttentionSparse, MatchesReferenceOnEveryIsa) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(91);
  ThreadPool pool(2);
  const Shape shapes[] = {{6, 3, 33, 5, 700, 3, 2.f},
                          {8, 2, 64, 16, 300, 1, 1.f},
                          {4, 4, 16, 7, 40, 4, 3.f},
                          {2, 1, 8, 4, 1, 1, 1.f}};
  for (const Shape& sh : shapes) {
    Cache cache(rng, sh.n_kv, sh.hd, sh.bs, sh.n_ctx, sh.k_sigma);
    const KvBlocks kv = cache.View();
    const Queries qs(rng, sh);
    const auto& [q, pos, scale] = qs;
    for (const AttentionSparsity& sp : Options()) {
      const auto [want, want_n] = RunReference(qs, sh, kv, sp);
      for (Isa isa : testing::TestIsas()) {
        ASSERT_TRUE(isa_guard.Set(isa));
        SCOPED_TRACE(std::string(IsaName(isa)) + " hd=" + std::to_string(sh.hd) +
                     " T=" + std::to_string(sp.skip_threshold) + " prog=" + std::to_string(sp.progressive) +
                     " margin=" + std::to_string(sp.progressive_margin));
        std::vector<float> got(q.size()), got1(q.size());
        AttentionSparseCounts n, n1;
        AttentionSparse(q.data(), sh.n_q, pos.data(), sh.n_heads, sh.n_kv, sh.hd, scale, kv, sp, got.data(),
                        &n, &pool);
        AttentionSparse(q.data(), sh.n_q, pos.data(), sh.n_heads, sh.n_kv, sh.hd, scale, kv, sp, got1.data(),
                        &n1, nullptr);
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 3e-5f) << i;
        EXPECT_EQ(n.v_rows, want_n.v_rows);
        EXPECT_EQ(n.v_rows_skipped, want_n.v_rows_skipped);
        EXPECT_EQ(n.k_rows, want_n.k_rows);
        EXPECT_EQ(n.k_rows_f32, want_n.k_rows_f32);
        // Thread count and batch do not change a bit: each query alone (split schedule).
        ASSERT_EQ(0, std::memcmp(got.data(), got1.data(), got.size() * 4));
        EXPECT_EQ(n1.v_rows_skipped, n.v_rows_skipped);
        for (int t = 0; t < sh.n_q; ++t) {
          const int64_t row = int64_t{sh.n_heads} * sh.hd;
          std::vector<float> alone(static_cast<size_t>(row));
          AttentionSparse(q.data() + t * row, 1, pos.data() + t, sh.n_heads, sh.n_kv, sh.hd, scale, kv, sp,
                          alone.data(), nullptr, &pool);
          ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + t * row, alone.size() * 4)) << "query " << t;
        }
      }
    }
  }
}

// K and V stored as q8_0 / q4_0 (the scores then read the query rounded to q8_0, as dense
// attention's do): value skipping against the reference on every ISA, which reads the same
// stored rows and rounds the query the same way.
TEST(AttentionSparse, QuantizedCacheMatchesReferenceOnEveryIsa) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(95);
  ThreadPool pool(2);
  const Shape sh{8, 2, 64, 16, 300, 2, 2.f};
  Cache cache(rng, sh.n_kv, sh.hd, sh.bs, sh.n_ctx, sh.k_sigma);
  const Queries qs(rng, sh);
  const auto& [q, pos, scale] = qs;
  const int64_t rows = static_cast<int64_t>(cache.k.size()) / sh.hd;
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const size_t rb = KvRowBytes(type, sh.hd);
    std::vector<uint8_t> k(static_cast<size_t>(rows) * rb), v(k.size());
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(type, cache.k.data() + r * sh.hd, k.data() + r * rb, sh.hd);
      QuantizeRow(type, cache.v.data() + r * sh.hd, v.data() + r * rb, sh.hd);
    }
    KvBlocks kv{k.data(), v.data(), cache.table.data(), sh.bs};
    kv.k_type = kv.v_type = type;
    for (float threshold : {0.f, 2e-3f}) {
      const AttentionSparsity sp{threshold, false, 0.f, nullptr};
      const auto [want, want_n] = RunReference(qs, sh, kv, sp);
      for (Isa isa : testing::TestIsas()) {
        ASSERT_TRUE(isa_guard.Set(isa));
        SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " T=" + std::to_string(threshold));
        std::vector<float> got(q.size());
        AttentionSparseCounts n;
        AttentionSparse(q.data(), sh.n_q, pos.data(), sh.n_heads, sh.n_kv, sh.hd, scale, kv, sp, got.data(),
                        &n, &pool);
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 3e-5f) << i;
        EXPECT_EQ(n.v_rows_skipped, want_n.v_rows_skipped);
      }
    }
  }
}

// Pruned heads (a head_kv map with ragged groups, one KV head unused) equal the full-head
// computation restricted to the kept heads.
TEST(AttentionSparse, PrunedHeadsEqualTheKeptHeadsOfTheFullResult) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int n_heads = 8, n_kv = 4, hd = 24, n_q = 2, n_ctx = 300;
  Cache cache(rng, n_kv, hd, 16, n_ctx, 1.f);
  auto q = testing::RandomFloats(rng, int64_t{n_q} * n_heads * hd, 1.f);
  const std::vector<int32_t> pos = {n_ctx - 2, n_ctx - 1};
  const std::vector<int32_t> kept = {0, 2, 3, 6};     // heads kept: groups 0 (1 head), 1 (2), 3 (1)
  const std::vector<int32_t> head_kv = {0, 1, 1, 3};  // their KV heads
  std::vector<float> q_kept(static_cast<size_t>(n_q) * kept.size() * hd);
  for (int t = 0; t < n_q; ++t)
    for (size_t j = 0; j < kept.size(); ++j)
      std::copy_n(q.data() + (int64_t{t} * n_heads + kept[j]) * hd, hd,
                  q_kept.data() + (t * kept.size() + j) * hd);
  const float scale = 0.2f;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> full(q.size()), part(q_kept.size());
    AttentionSparsity sp;
    AttentionSparse(q.data(), n_q, pos.data(), n_heads, n_kv, hd, scale, cache.View(), sp, full.data(),
                    nullptr, &pool);
    sp.head_kv = head_kv.data();
    AttentionSparseCounts n;
    AttentionSparse(q_kept.data(), n_q, pos.data(), static_cast<int>(kept.size()), n_kv, hd, scale,
                    cache.View(), sp, part.data(), &n, &pool);
    for (int t = 0; t < n_q; ++t)
      for (size_t j = 0; j < kept.size(); ++j)
        ASSERT_EQ(0, std::memcmp(part.data() + (t * kept.size() + j) * hd,
                                 full.data() + (int64_t{t} * n_heads + kept[j]) * hd, hd * 4))
            << "t=" << t << " head " << kept[j];
    EXPECT_EQ(n.v_rows, int64_t{3} * (pos[0] + 1 + pos[1] + 1));  // 3 KV heads read, not 4
  }
}

// T = 0 reads every V row and agrees with the dense kernel; a huge margin recomputes every
// score in f32 and gives the non-progressive bits exactly.
TEST(AttentionSparse, ExactSettingsMatchDense) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(17);
  ThreadPool pool(2);
  const int n_heads = 6, n_kv = 2, hd = 40, n_q = 3, n_ctx = 530;
  Cache cache(rng, n_kv, hd, 32, n_ctx, 1.5f);
  auto q = testing::RandomFloats(rng, int64_t{n_q} * n_heads * hd, 1.f);
  const std::vector<int32_t> pos = {n_ctx - 3, n_ctx - 2, n_ctx - 1};
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> dense(q.size()), exact(q.size()), prog(q.size());
    Attention(q.data(), n_q, pos.data(), n_heads, n_kv, hd, 0.15f, cache.View(), dense.data(), &pool);
    AttentionSparseCounts n;
    AttentionSparse(q.data(), n_q, pos.data(), n_heads, n_kv, hd, 0.15f, cache.View(), {}, exact.data(), &n,
                    &pool);
    EXPECT_EQ(n.v_rows_skipped, 0);
    EXPECT_EQ(n.v_rows, int64_t{n_kv} * (3 * n_ctx - 3));
    EXPECT_EQ(n.k_rows_f32, n.k_rows);
    for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(exact[i], dense[i], 2e-5f) << i;
    AttentionSparsity sp;
    sp.progressive = true;
    sp.progressive_margin = 1e30f;
    AttentionSparseCounts np;
    AttentionSparse(q.data(), n_q, pos.data(), n_heads, n_kv, hd, 0.15f, cache.View(), sp, prog.data(), &np,
                    &pool);
    EXPECT_EQ(np.k_rows_f32, np.k_rows);
    ASSERT_EQ(0, std::memcmp(prog.data(), exact.data(), q.size() * 4));
  }
}

// Dropping V rows of total weight P changes each output element by at most P * max|V|.
TEST(AttentionSparse, SkipErrorBoundedBySkippedMassTimesMaxValue) {
  std::mt19937 rng(23);
  ThreadPool pool(2);
  const int n_heads = 4, n_kv = 2, hd = 32, n_q = 4, n_ctx = 900;
  Cache cache(rng, n_kv, hd, 16, n_ctx, 2.f);
  auto q = testing::RandomFloats(rng, int64_t{n_q} * n_heads * hd, 1.f);
  std::vector<int32_t> pos(n_q);
  for (int t = 0; t < n_q; ++t) pos[static_cast<size_t>(t)] = n_ctx - n_q + t;
  float max_v = 0.f;
  for (float x : cache.v) max_v = std::max(max_v, std::fabs(x));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> exact(q.size());
  AttentionSparse(q.data(), n_q, pos.data(), n_heads, n_kv, hd, scale, cache.View(), {}, exact.data(),
                  nullptr, &pool);
  for (float t : {1e-4f, 1e-3f, 1e-2f}) {
    AttentionSparsity sp;
    sp.skip_threshold = t;
    std::vector<float> got(q.size());
    std::vector<double> mass(static_cast<size_t>(n_q) * n_heads);
    AttentionSparseCounts n;
    AttentionSparse(q.data(), n_q, pos.data(), n_heads, n_kv, hd, scale, cache.View(), sp, got.data(), &n,
                    &pool);
    ref::AttentionSparseNaive(q.data(), n_q, pos.data(), n_heads, n_kv, hd, scale, cache.View(), sp,
                              got.data() + 0, nullptr, mass.data());
    // (the reference overwrote got; recompute the kernel's result)
    AttentionSparse(q.data(), n_q, pos.data(), n_heads, n_kv, hd, scale, cache.View(), sp, got.data(),
                    nullptr, &pool);
    EXPECT_GT(n.v_rows_skipped, 0) << "threshold " << t << " skipped nothing: the bound is untested";
    for (int r = 0; r < n_q * n_heads; ++r)
      for (int d = 0; d < hd; ++d) {
        const size_t i = static_cast<size_t>(r) * hd + d;
        ASSERT_LE(std::fabs(got[i] - exact[i]), mass[static_cast<size_t>(r)] * max_v + 1e-5)
            << "T=" << t << " row " << r;
      }
  }
}

// Counts on a hand-made case: one key dominates, the others' weights are known.
TEST(AttentionSparse, CountsExactOnSmallCase) {
  const int hd = 4, n_keys = 5;
  // [5, 1, 4]: key 0 aligned with q (score 10), keys 1..4 orthogonal (score 0).
  std::vector<float> k(static_cast<size_t>(n_keys) * hd, 0.f), v(k.size(), 1.f);
  k[0] = 10.f;
  for (int p = 1; p < n_keys; ++p) k[static_cast<size_t>(p) * hd + 1] = 1.f;
  std::vector<int8_t> k8(k.size());
  std::vector<float> ks(n_keys);
  for (int p = 0; p < n_keys; ++p)
    ks[static_cast<size_t>(p)] = QuantizeActInt8(k.data() + p * hd, hd, 0.f, k8.data() + p * hd);
  const int32_t table[1] = {0};
  const KvBlocks kv{k.data(), v.data(), table, 8, k8.data(), ks.data()};
  const float q[4] = {1.f, 0.f, 0.f, 0.f};
  const int32_t pos = n_keys - 1;
  float out[4];
  // Weights: key 0: 1/(1+4e^-10) ~ 0.99982; others e^-10/(1+4e^-10) ~ 4.5e-5 each.
  AttentionSparsity sp;
  sp.skip_threshold = 1e-4f;
  AttentionSparseCounts n;
  AttentionSparse(q, 1, &pos, 1, 1, hd, 1.f, kv, sp, out, &n, nullptr);
  EXPECT_EQ(n.v_rows, 5);
  EXPECT_EQ(n.v_rows_skipped, 4);
  EXPECT_NEAR(out[0], 1.0f / (1.0f + 4.0f * std::exp(-10.f)), 1e-6f);  // kept weight times v = 1
  sp.skip_threshold = 1e-5f;
  n = {};
  AttentionSparse(q, 1, &pos, 1, 1, hd, 1.f, kv, sp, out, &n, nullptr);
  EXPECT_EQ(n.v_rows_skipped, 0);
  EXPECT_NEAR(out[0], 1.0f, 1e-6f);
  // Progressive, margin 5: only key 0 (INT8 score 10, the others 0) is recomputed in f32.
  sp = {};
  sp.progressive = true;
  sp.progressive_margin = 5.f;
  n = {};
  AttentionSparse(q, 1, &pos, 1, 1, hd, 1.f, kv, sp, out, &n, nullptr);
  EXPECT_EQ(n.k_rows, 5);
  EXPECT_EQ(n.k_rows_f32, 1);
  sp.progressive_margin = 20.f;
  n = {};
  AttentionSparse(q, 1, &pos, 1, 1, hd, 1.f, kv, sp, out, &n, nullptr);
  EXPECT_EQ(n.k_rows_f32, 5);
}

}  // namespace
}  // namespace ferry::kernels
