// Attention (online softmax over a block table) against the naive materialized reference:
// GQA, non-contiguous physical blocks, ragged head_dim, and thread-count invariance.
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

struct Case {
  int n_heads, n_kv_heads, head_dim, block_size, n_ctx, n_q;
};

// n_ctx keys in blocks of bs with the physical blocks shuffled, and random K and V
// ([n_blocks, bs, nkv, hd] each), drawn from rng in that order.
struct ShuffledCache {
  std::vector<int32_t> table;
  std::vector<float> k, v;
  ShuffledCache(std::mt19937& rng, int n_ctx, int bs, int nkv, int hd) : table((n_ctx + bs - 1) / bs) {
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    const int64_t cache_n = static_cast<int64_t>(table.size()) * bs * nkv * hd;
    k = testing::RandomFloats(rng, cache_n, 1.f);
    v = testing::RandomFloats(rng, cache_n, 1.f);
  }
};

TEST(Attention, MatchesNaiveWithGqaAndShuffledBlocks) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(40);
  ThreadPool pool(2);
  const Case cases[] = {
      {8, 2, 64, 16, 70, 5}, {4, 4, 40, 8, 9, 3}, {6, 3, 33, 32, 130, 4}, {2, 1, 16, 4, 1, 1}};
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " hd=" + std::to_string(c.head_dim));
      const int n_blocks_used = (c.n_ctx + c.block_size - 1) / c.block_size;
      const int n_phys = n_blocks_used + 3;
      std::vector<int32_t> perm(n_phys);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<int32_t> table(perm.begin(), perm.begin() + n_blocks_used);
      const int64_t cache_n = static_cast<int64_t>(n_phys) * c.block_size * c.n_kv_heads * c.head_dim;
      // [n_phys, block_size, n_kv_heads, head_dim]
      auto k = testing::RandomFloats(rng, cache_n, 1.f);
      auto v = testing::RandomFloats(rng, cache_n, 1.f);
      auto q = testing::RandomFloats(rng, static_cast<int64_t>(c.n_q) * c.n_heads * c.head_dim, 1.f);
      // The last n_q positions of the context (a chunked prefill), shuffled order.
      std::vector<int32_t> pos(c.n_q);
      for (int t = 0; t < c.n_q; ++t) pos[t] = c.n_ctx - c.n_q + t;
      std::shuffle(pos.begin(), pos.end(), rng);
      KvBlocks kv{k.data(), v.data(), table.data(), c.block_size};
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      std::vector<float> want(q.size()), got(q.size()), got1(q.size());
      ref::AttentionNaive(q.data(), c.n_q, pos.data(), c.n_heads, c.n_kv_heads, c.head_dim, scale, kv,
                          want.data());
      Attention(q.data(), c.n_q, pos.data(), c.n_heads, c.n_kv_heads, c.head_dim, scale, kv, got.data(),
                &pool);
      Attention(q.data(), c.n_q, pos.data(), c.n_heads, c.n_kv_heads, c.head_dim, scale, kv, got1.data(),
                nullptr);
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5f) << i;
      ASSERT_EQ(0, std::memcmp(got.data(), got1.data(), got.size() * 4));
      // A single query alone gives the same bits as within the batch.
      std::vector<float> alone(static_cast<size_t>(c.n_heads) * c.head_dim);
      Attention(q.data(), 1, pos.data(), c.n_heads, c.n_kv_heads, c.head_dim, scale, kv, alone.data(), &pool);
      ASSERT_EQ(0, std::memcmp(alone.data(), got.data(), alone.size() * 4));
    }
  }
}

// Flash-decoding: contexts spanning several 256-key chunks. The split schedule (few queries,
// several threads: one item per chunk, partials merged in order) and the serial one (no pool,
// or many queries) give the same bits, equal to the naive softmax within float rounding, and
// a query's output is the same alone or beside others, whatever the thread count.
TEST(Attention, SplitAlongSequenceMergesExactlyAndIsBatchInvariant) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(41);
  ThreadPool pool2(2), pool3(3);
  const int nh = 4, nkv = 1, hd = 32, bs = 48, n_ctx = 1100;  // 48 does not divide 256: ragged tiles
  ShuffledCache cache(rng, n_ctx, bs, nkv, hd);
  const std::vector<int32_t>& table = cache.table;
  std::vector<float>&k = cache.k, &v = cache.v;
  // Scores far apart across chunks (keys of early positions scaled up): the merge must rescale
  // without overflow or loss.
  for (int p = 0; p < 300; ++p) {
    const int64_t off = (static_cast<int64_t>(table[p / bs]) * bs + p % bs) * nkv * hd;
    for (int d = 0; d < hd; ++d) k[off + d] *= 8.f;
  }
  KvBlocks kv{k.data(), v.data(), table.data(), bs};
  const int n_q = 3;
  std::vector<int32_t> pos = {n_ctx - 1, 700, 255};
  auto q = testing::RandomFloats(rng, int64_t{n_q} * nh * hd, 1.f);
  const float scale = 0.3f;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> want(q.size()), batch(q.size());
    ref::AttentionNaive(q.data(), n_q, pos.data(), nh, nkv, hd, scale, kv, want.data());
    Attention(q.data(), n_q, pos.data(), nh, nkv, hd, scale, kv, batch.data(), nullptr);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(batch[i], want[i], 2e-5f) << i;
    for (int t = 0; t < n_q; ++t) {
      const size_t row = static_cast<size_t>(nh) * hd;
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        std::vector<float> alone(row);
        Attention(q.data() + t * row, 1, &pos[t], nh, nkv, hd, scale, kv, alone.data(), pool);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + t * row, row * 4)) << "query " << t;
      }
    }
    std::vector<float> batch3(q.size());
    Attention(q.data(), n_q, pos.data(), nh, nkv, hd, scale, kv, batch3.data(), &pool3);
    ASSERT_EQ(0, std::memcmp(batch3.data(), batch.data(), batch.size() * 4));
  }
}

// Gemma's and gpt-oss's variants against a naive double softmax written here: query t attends
// keys max(0, pos - window + 1) .. pos, each score s -> cap * tanh(s / cap), and head h's sink
// adds exp(sink[h]) to the denominator. Windows inside one tile, across tiles and chunks, and
// wider than the context; sinks above every score (the kernel rescales the accumulator) and
// below; every schedule gives the same bits.
TEST(Attention, SlidingWindowSoftCapAndSinksMatchNaive) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(43);
  ThreadPool pool2(2), pool3(3);
  const int nh = 4, nkv = 2, hd = 32, bs = 48, n_ctx = 1100;
  const ShuffledCache cache(rng, n_ctx, bs, nkv, hd);
  const std::vector<int32_t>& table = cache.table;
  const std::vector<float>&k = cache.k, &v = cache.v;
  KvBlocks kv{k.data(), v.data(), table.data(), bs};
  std::vector<int32_t> pos = {n_ctx - 1, 700, 255, 256, 10, 0};
  const int n_q = static_cast<int>(pos.size());
  auto q = testing::RandomFloats(rng, int64_t{n_q} * nh * hd, 1.f);
  const float scale = 0.5f;
  const std::vector<float> sinks = {6.0f, -1.5f, 0.3f, -30.f};  // [nh]; scores are about N(0, 2.8^2)
  auto at = [&](const std::vector<float>& c, int p, int g, int d) {
    return c[(static_cast<int64_t>(table[p / bs]) * bs + p % bs) * nkv * hd + g * hd + d];
  };
  for (const AttentionVariant var :
       {AttentionVariant{1, 0.f}, AttentionVariant{37, 0.f}, AttentionVariant{300, 0.f},
        AttentionVariant{2000, 2.f}, AttentionVariant{0, 2.f}, AttentionVariant{100, 3.f},
        AttentionVariant{0, 0.f, sinks.data()}, AttentionVariant{37, 0.f, sinks.data()},
        AttentionVariant{1, 0.f, sinks.data()}}) {
    std::vector<double> want(q.size());
    for (int t = 0; t < n_q; ++t)
      for (int h = 0; h < nh; ++h) {
        const int g = h / (nh / nkv), lo = var.window > 0 ? std::max(0, pos[t] + 1 - var.window) : 0;
        std::vector<double> s;
        for (int p = lo; p <= pos[t]; ++p) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[(t * nh + h) * hd + d] * at(k, p, g, d);
          dot *= scale;
          s.push_back(var.logit_softcap > 0 ? var.logit_softcap * std::tanh(dot / var.logit_softcap) : dot);
        }
        double mx = *std::max_element(s.begin(), s.end());
        if (var.sinks) mx = std::max(mx, double{var.sinks[h]});
        double sum = var.sinks ? std::exp(var.sinks[h] - mx) : 0.0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int p = lo; p <= pos[t]; ++p)
          for (int d = 0; d < hd; ++d) want[(t * nh + h) * hd + d] += s[p - lo] / sum * at(v, p, g, d);
      }
    for (Isa isa : testing::TestIsas()) {
      ASSERT_TRUE(isa_guard.Set(isa));
      SCOPED_TRACE(std::string(IsaName(isa)) + " window " + std::to_string(var.window) +
                   (var.sinks ? " sinks" : ""));
      std::vector<float> batch(q.size());
      Attention(q.data(), n_q, pos.data(), nh, nkv, hd, scale, kv, batch.data(), nullptr, var);
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(batch[i], want[i], 2e-5) << i;
      for (int t = 0; t < n_q; ++t) {
        const size_t row = static_cast<size_t>(nh) * hd;
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          std::vector<float> alone(row);
          Attention(q.data() + t * row, 1, &pos[t], nh, nkv, hd, scale, kv, alone.data(), pool, var);
          ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + t * row, row * 4)) << "query " << t;
        }
      }
      std::vector<float> batch3(q.size());
      Attention(q.data(), n_q, pos.data(), nh, nkv, hd, scale, kv, batch3.data(), &pool3, var);
      ASSERT_EQ(0, std::memcmp(batch3.data(), batch.data(), batch.size() * 4));
    }
  }
}

// Multi-head latent attention's cache (KvBlocks::v_in_k): no V rows, a key's value is the first
// v_in_k values of its K row. For each K type and ISA, on one long sequence (split schedule) and
// a prefill batch: bit for bit the first v_in_k outputs of attention over a V cache holding a copy
// of the K rows (each output dim accumulates on its own), and the naive reference within rounding.
TEST(Attention, ValuesInsideKeyRowsMatchAWholeRowCopy) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(77);
  ThreadPool pool(2);
  const int n_heads = 4, hd = 96, dv = 64, bs = 16, n_ctx = 300;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type));
      ShuffledCache c(rng, n_ctx, bs, 1, hd);
      const size_t rb = KvRowBytes(type, hd), n_rows = c.table.size() * bs;
      std::vector<uint8_t> k(n_rows * rb);  // [slots, one head row]
      for (size_t r = 0; r < n_rows; ++r) QuantizeRow(type, c.k.data() + r * hd, k.data() + r * rb, hd);
      for (int n_q : {1, 7}) {
        std::vector<int32_t> pos(n_q);
        for (int t = 0; t < n_q; ++t) pos[t] = n_ctx - n_q + t;
        auto q = testing::RandomFloats(rng, int64_t{n_q} * n_heads * hd, 1.f);
        KvBlocks latent{k.data(), nullptr, c.table.data(), bs};
        latent.k_type = latent.v_type = type;
        latent.v_in_k = dv;
        KvBlocks copy{k.data(), k.data(), c.table.data(), bs};
        copy.k_type = copy.v_type = type;
        const float scale = 0.1f;
        std::vector<float> got(static_cast<size_t>(n_q) * n_heads * dv),
            whole(static_cast<size_t>(n_q) * n_heads * hd), want(got.size()), pv_int(got.size());
        Attention(q.data(), n_q, pos.data(), n_heads, 1, hd, scale, latent, got.data(), &pool);
        Attention(q.data(), n_q, pos.data(), n_heads, 1, hd, scale, copy, whole.data(), &pool);
        // pv_int: q8_0's integer P.V rounds its weights to int16 (ref.h AttentionNaive's bound).
        ref::AttentionNaive(q.data(), n_q, pos.data(), n_heads, 1, hd, scale, latent, want.data(),
                            pv_int.data());
        for (int r = 0; r < n_q * n_heads; ++r)
          for (int d = 0; d < dv; ++d) {
            ASSERT_EQ(got[r * dv + d], whole[r * hd + d]) << "row " << r << " dim " << d;
            ASSERT_NEAR(got[r * dv + d], want[r * dv + d], 2e-5f + pv_int[r * dv + d])
                << "row " << r << " dim " << d;
          }
      }
    }
  }
}

TEST(Attention, SingleKeyReturnsItsValue) {
  // One key: softmax weight 1, output = v exactly.
  const int hd = 8;
  std::vector<float> k(hd, 0.5f), v(hd), q(hd, 1.f), out(hd);
  for (int i = 0; i < hd; ++i) v[i] = static_cast<float>(i) - 3.f;
  const int32_t table[1] = {0};
  const int32_t pos[1] = {0};
  KvBlocks kv{k.data(), v.data(), table, 1};
  Attention(q.data(), 1, pos, 1, 1, hd, 0.3f, kv, out.data(), nullptr);
  for (int i = 0; i < hd; ++i) EXPECT_EQ(out[i], v[i]);
}

}  // namespace
}  // namespace ferry::kernels
