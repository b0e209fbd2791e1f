// AttentionSparse: causal attention whose exact softmax weights are known before V is read, so
// V rows of negligible weight can be skipped (value-fetch skipping), with scores optionally
// computed first from an INT8 copy of K and recomputed in f32 only near the max (SpAtten's
// progressive precision), over any subset of query heads (head pruning).
//
// Per (query, KV-head group) task, keys are cut into chunks of kKvChunk positions (as in
// attention.cc) and processed in phases, each chunk by itself:
//   1. scores of the chunk (INT8 when progressive) and the chunk max;
//   2. progressive only: f32 recompute of the rows near the max, new chunk max;
//   3. p = exp(s - M) with the global max M, chunk sums (L = chunk sums added in chunk order);
//   4. V: rows whose weight p / L is below the threshold for every head of the group are not
//      read; the rest accumulate into a per-chunk partial, partials added in chunk order.
// Every reduction has a fixed order, so both schedules (tasks walk their chunks; or, for few
// tasks, every (task, chunk) is a parallel item per phase) give the same bits, independent of
// n_q, batch and thread count. The kernel uses the dispatched primitives (the K and V types'
// attention micro-kernels one key at a time, add, quantize_i8, dot_i8), so each ISA runs its
// own SIMD code for them and K/V are read in their stored types.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <vector>

#include "base/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {
namespace {

constexpr int kKvChunk = 256;  // keys per chunk (split unit along the sequence)

struct Args {
  const float* q;
  const int32_t* q_pos;
  int n_heads, head_dim;
  int64_t kv_stride;              // elements per token slot: n_kv_heads * head_dim (the INT8 copy's)
  int64_t k_row, v_row;           // bytes of one head row of K / V in their stored types
  internal::AttnScoresFn scores;  // the K type's micro-kernel, one key x the group's heads
  internal::AttnPvFn pv;          // the V type's
  int n_kv_heads;
  float scale;
  const KvBlocks* kv;
  AttentionSparsity sp;
  float* out;
};

// One (query t, heads h0..h0+nh-1 all reading KV head kvh) task.
struct Task {
  int t, h0, nh, kvh, n_keys;
  int NumChunks() const { return (n_keys + kKvChunk - 1) / kKvChunk; }
};

// Scratch of one task.
struct TaskBuf {
  std::vector<float> s;             // [nh, n_keys] scores, then exp(s - M)
  std::vector<float> cmax;          // [n_chunks, nh] chunk maxima
  std::vector<float> csum;          // [n_chunks, nh] chunk sums of exp(s - M)
  std::vector<float> acc;           // [n_chunks, nh, hd] partial p*v sums
  std::vector<float> m, l;          // [nh] global max, sum
  std::vector<int8_t> q8;           // [nh, hd] INT8 query (progressive)
  std::vector<float> qs;            // [nh] its scales
  std::vector<std::byte> q_form;    // [nh, AttnQueryBytes] the query rows in the K type's form
  std::vector<const void*> q_rows;  // [nh] the query rows as attn_scores reads them
  std::vector<float*> acc_rows;     // [n_chunks, nh] rows of each chunk's acc (chunks run in parallel)

  void Resize(const Task& k, int hd) {
    const size_t nc = static_cast<size_t>(k.NumChunks()), nh = static_cast<size_t>(k.nh);
    s.resize(nh * static_cast<size_t>(k.n_keys));
    cmax.resize(nc * nh);
    csum.resize(nc * nh);
    acc.resize(nc * nh * static_cast<size_t>(hd));
    m.resize(nh);
    l.resize(nh);
    q8.resize(nh * static_cast<size_t>(hd));
    qs.resize(nh);
    q_rows.resize(nh);
    acc_rows.resize(nc * nh);
  }
};

// Calls f(pos, slot) for the keys [k0, k1) with slot = physical token slot of pos.
template <typename F>
void ForKeys(const KvBlocks& kv, int k0, int k1, F&& f) {
  for (int pos = k0; pos < k1;) {
    const int blk = pos / kv.block_size;
    const int64_t base =
        static_cast<int64_t>(kv.block_table[blk]) * kv.block_size - int64_t{blk} * kv.block_size;
    const int end = std::min(k1, (blk + 1) * kv.block_size);
    for (; pos < end; ++pos) f(pos, base + pos);
  }
}

const float* QueryRow(const Args& a, const Task& k, int i) {
  return a.q + (static_cast<int64_t>(k.t) * a.n_heads + k.h0 + i) * a.head_dim;
}

// K (V) head row of token slot `slot` in its stored type.
const uint8_t* KeyRow(const Args& a, const Task& k, int64_t slot) {
  return static_cast<const uint8_t*>(a.kv->k_cache) + (slot * a.n_kv_heads + k.kvh) * a.k_row;
}
const uint8_t* ValueRow(const Args& a, const Task& k, int64_t slot) {
  return static_cast<const uint8_t*>(a.kv->v_cache) + (slot * a.n_kv_heads + k.kvh) * a.v_row;
}

// Scores of key `pos` (at `slot`) for every head of the task: b.s[i][pos].
void ScoreKey(const Args& a, const Task& k, TaskBuf& b, int pos, int64_t slot) {
  a.scores(b.q_rows.data(), k.nh, KeyRow(a, k, slot), 0, 1, a.head_dim, a.scale, b.s.data() + pos, k.n_keys);
}

// The task's query rows as attn_scores reads them (the K type's form, prepared once per task).
void SetQueryRows(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b) {
  const DType kt = a.kv->k_type;
  const size_t q_bytes = internal::AttnQueryBytes(kt, a.head_dim);
  b.q_form.resize(static_cast<size_t>(k.nh) * q_bytes);
  for (int i = 0; i < k.nh; ++i)
    b.q_rows[static_cast<size_t>(i)] =
        internal::PrepareAttnQuery(tab, kt, QueryRow(a, k, i), a.head_dim, b.q_form.data() + i * q_bytes);
}

void QuantizeQuery(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b) {
  for (int i = 0; i < k.nh; ++i)
    b.qs[static_cast<size_t>(i)] =
        tab.quantize_i8(QueryRow(a, k, i), a.head_dim, 0.f, b.q8.data() + i * a.head_dim);
}

// Phase 1: scores of chunk c (INT8 when progressive) and their max per head.
void ScoreChunk(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b, int c,
                AttentionSparseCounts& cnt) {
  const int hd = a.head_dim, nh = k.nh;
  const int k0 = c * kKvChunk, k1 = std::min(k.n_keys, k0 + kKvChunk);
  float* cmax = b.cmax.data() + static_cast<size_t>(c) * nh;
  std::fill(cmax, cmax + nh, -std::numeric_limits<float>::infinity());
  const KvBlocks& kv = *a.kv;
  ForKeys(kv, k0, k1, [&](int pos, int64_t slot) {
    const int64_t row = slot * a.kv_stride + int64_t{k.kvh} * hd;
    if (!a.sp.progressive) ScoreKey(a, k, b, pos, slot);
    for (int i = 0; i < nh; ++i) {
      float& sc = b.s[static_cast<size_t>(i) * k.n_keys + pos];
      if (a.sp.progressive) {
        const float ks = kv.k_i8_scale[slot * a.n_kv_heads + k.kvh];
        sc = static_cast<float>(tab.dot_i8(kv.k_i8 + row, b.q8.data() + i * hd, hd)) *
             (b.qs[static_cast<size_t>(i)] * ks) * a.scale;
      }
      cmax[i] = std::max(cmax[i], sc);
    }
  });
  cnt.k_rows += k1 - k0;
  if (!a.sp.progressive) cnt.k_rows_f32 += k1 - k0;
}

// Phase 2 (progressive): rows where some head's INT8 score is within the margin of its max
// (mhat) are read in their stored type and every head of the group takes that score.
void RecomputeChunk(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b, int c,
                    const float* mhat, AttentionSparseCounts& cnt) {
  const int nh = k.nh;
  const int k0 = c * kKvChunk, k1 = std::min(k.n_keys, k0 + kKvChunk);
  float* cmax = b.cmax.data() + static_cast<size_t>(c) * nh;
  std::fill(cmax, cmax + nh, -std::numeric_limits<float>::infinity());
  ForKeys(*a.kv, k0, k1, [&](int pos, int64_t slot) {
    bool need = false;
    for (int i = 0; i < nh && !need; ++i)
      need = b.s[static_cast<size_t>(i) * k.n_keys + pos] >= mhat[i] - a.sp.progressive_margin;
    if (need) {
      ScoreKey(a, k, b, pos, slot);
      ++cnt.k_rows_f32;
    }
    for (int i = 0; i < nh; ++i) cmax[i] = std::max(cmax[i], b.s[static_cast<size_t>(i) * k.n_keys + pos]);
  });
}

// Phase 3: p = exp(s - m) in place, chunk sums in key order.
void ExpChunk(const Task& k, TaskBuf& b, int c) {
  const int k0 = c * kKvChunk, k1 = std::min(k.n_keys, k0 + kKvChunk);
  for (int i = 0; i < k.nh; ++i) {
    float* s = b.s.data() + static_cast<size_t>(i) * k.n_keys;
    float sum = 0.f;
    for (int pos = k0; pos < k1; ++pos) sum += s[pos] = std::exp(s[pos] - b.m[static_cast<size_t>(i)]);
    b.csum[static_cast<size_t>(c) * k.nh + i] = sum;
  }
}

// Phase 4: acc[nh, hd] = sum over the read rows of chunk c of p * v.
void ValueChunk(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b, int c, float* acc,
                AttentionSparseCounts& cnt) {
  const int hd = a.head_dim, nh = k.nh;
  const int k0 = c * kKvChunk, k1 = std::min(k.n_keys, k0 + kKvChunk);
  std::fill(acc, acc + static_cast<int64_t>(nh) * hd, 0.f);
  float** acc_rows = b.acc_rows.data() + static_cast<size_t>(c) * nh;
  for (int i = 0; i < nh; ++i) acc_rows[i] = acc + int64_t{i} * hd;
  ForKeys(*a.kv, k0, k1, [&](int pos, int64_t slot) {
    bool need = false;
    for (int i = 0; i < nh && !need; ++i)  // p below T * L is a weight below T
      need =
          b.s[static_cast<size_t>(i) * k.n_keys + pos] >= a.sp.skip_threshold * b.l[static_cast<size_t>(i)];
    if (!need) {
      ++cnt.v_rows_skipped;
      return;
    }
    a.pv(b.s.data() + pos, k.n_keys, nh, ValueRow(a, k, slot), 0, 1, hd, acc_rows);
  });
  cnt.v_rows += k1 - k0;
}

void GlobalMax(const Task& k, TaskBuf& b) {
  for (int i = 0; i < k.nh; ++i) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < k.NumChunks(); ++c) mx = std::max(mx, b.cmax[static_cast<size_t>(c) * k.nh + i]);
    b.m[static_cast<size_t>(i)] = mx;
  }
}

void GlobalSum(const Task& k, TaskBuf& b) {
  for (int i = 0; i < k.nh; ++i) {
    float sum = 0.f;
    for (int c = 0; c < k.NumChunks(); ++c) sum += b.csum[static_cast<size_t>(c) * k.nh + i];
    b.l[static_cast<size_t>(i)] = sum;
  }
}

// out = (partial_0 + partial_1 + ... in chunk order) / L.
void Finish(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b) {
  const int64_t n = int64_t{k.nh} * a.head_dim;
  float* run = b.acc.data();
  for (int c = 1; c < k.NumChunks(); ++c) tab.add(run, b.acc.data() + c * n, n);
  for (int i = 0; i < k.nh; ++i) {
    float* o = a.out + (static_cast<int64_t>(k.t) * a.n_heads + k.h0 + i) * a.head_dim;
    const float inv = b.l[static_cast<size_t>(i)] > 0.f ? 1.0f / b.l[static_cast<size_t>(i)] : 0.f;
    for (int d = 0; d < a.head_dim; ++d) o[d] = run[int64_t{i} * a.head_dim + d] * inv;
  }
}

// The whole task on one thread, phases in order.
void RunTask(const internal::KernelTable& tab, const Args& a, const Task& k, TaskBuf& b,
             AttentionSparseCounts& cnt) {
  b.Resize(k, a.head_dim);
  SetQueryRows(tab, a, k, b);
  const int nc = k.NumChunks();
  if (a.sp.progressive) QuantizeQuery(tab, a, k, b);
  for (int c = 0; c < nc; ++c) ScoreChunk(tab, a, k, b, c, cnt);
  if (a.sp.progressive) {
    GlobalMax(k, b);
    const std::vector<float> mhat = b.m;
    for (int c = 0; c < nc; ++c) RecomputeChunk(tab, a, k, b, c, mhat.data(), cnt);
  }
  GlobalMax(k, b);
  for (int c = 0; c < nc; ++c) ExpChunk(k, b, c);
  GlobalSum(k, b);
  const int64_t n = int64_t{k.nh} * a.head_dim;
  for (int c = 0; c < nc; ++c) ValueChunk(tab, a, k, b, c, b.acc.data() + c * n, cnt);
  Finish(tab, a, k, b);
}

}  // namespace

void AttentionSparse(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
                     float scale, const KvBlocks& kv, const AttentionSparsity& sparsity, float* out,
                     AttentionSparseCounts* counts, ThreadPool* pool) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  FERRY_CHECK(KvTypeFits(kv.k_type, head_dim) && KvTypeFits(kv.v_type, head_dim));
  FERRY_CHECK(kv.v_in_k == 0);  // models with a latent V cache run dense attention only
  const Args a{q,
               q_pos,
               n_heads,
               head_dim,
               static_cast<int64_t>(n_kv_heads) * head_dim,
               static_cast<int64_t>(KvRowBytes(kv.k_type, head_dim)),
               static_cast<int64_t>(KvRowBytes(kv.v_type, head_dim)),
               tab.attn_scores[static_cast<int>(kv.k_type)],
               tab.attn_pv[static_cast<int>(kv.v_type)],
               n_kv_heads,
               scale,
               &kv,
               sparsity,
               out};
  // Head runs sharing one KV head.
  struct Run {
    int h0, nh, kvh;
  };
  std::vector<Run> runs;
  const int group = std::max(1, n_heads / std::max(1, n_kv_heads));
  for (int h = 0; h < n_heads; ++h) {
    const int kvh = sparsity.head_kv ? sparsity.head_kv[h] : h / group;
    if (!runs.empty() && runs.back().kvh == kvh) {
      ++runs.back().nh;
    } else {
      runs.push_back({h, 1, kvh});
    }
  }
  const int64_t n_tasks = static_cast<int64_t>(n_q) * static_cast<int64_t>(runs.size());
  auto task_at = [&](int64_t idx) {
    const Run& r = runs[static_cast<size_t>(idx % static_cast<int64_t>(runs.size()))];
    const int t = static_cast<int>(idx / static_cast<int64_t>(runs.size()));
    return Task{t, r.h0, r.nh, r.kvh, q_pos[t] + 1};
  };
  const int threads = pool ? pool->size() : 1;
  int max_chunks = 0;
  for (int t = 0; t < n_q; ++t) max_chunks = std::max(max_chunks, (q_pos[t] + kKvChunk) / kKvChunk);
  std::mutex mu;
  AttentionSparseCounts total;

  if (threads <= 1 || max_chunks <= 1 || n_tasks >= 2 * int64_t{threads}) {
    auto work = [&](int64_t begin, int64_t end) {
      TaskBuf b;
      AttentionSparseCounts cnt;
      for (int64_t idx = begin; idx < end; ++idx) RunTask(tab, a, task_at(idx), b, cnt);
      std::lock_guard<std::mutex> lock(mu);
      total.Add(cnt);
    };
    if (pool && threads > 1) {
      pool->ParallelFor(n_tasks, work);
    } else {
      work(0, n_tasks);
    }
  } else {
    // Few tasks (decode): one buffer per task, each phase parallel over (task, chunk) items;
    // counts go to per-item slots so that threads never share a counter.
    std::vector<TaskBuf> bufs(static_cast<size_t>(n_tasks));
    std::vector<Task> tasks(static_cast<size_t>(n_tasks));
    for (int64_t i = 0; i < n_tasks; ++i) {
      const size_t ti = static_cast<size_t>(i);
      tasks[ti] = task_at(i);
      bufs[ti].Resize(tasks[ti], head_dim);
      SetQueryRows(tab, a, tasks[ti], bufs[ti]);
      if (sparsity.progressive) QuantizeQuery(tab, a, tasks[ti], bufs[ti]);
    }
    const int64_t n_items = n_tasks * max_chunks;
    std::vector<AttentionSparseCounts> item_counts(static_cast<size_t>(n_items));
    auto per_chunk = [&](auto&& f) {
      pool->ParallelFor(n_items, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const size_t ti = static_cast<size_t>(item / max_chunks);
          const int c = static_cast<int>(item % max_chunks);
          if (c < tasks[ti].NumChunks()) f(tasks[ti], bufs[ti], c, item_counts[static_cast<size_t>(item)]);
        }
      });
    };
    auto per_task = [&](auto&& f) {
      for (size_t ti = 0; ti < tasks.size(); ++ti) f(tasks[ti], bufs[ti]);
    };
    per_chunk([&](const Task& k, TaskBuf& b, int c, AttentionSparseCounts& cnt) {
      ScoreChunk(tab, a, k, b, c, cnt);
    });
    std::vector<std::vector<float>> mhat(tasks.size());
    if (sparsity.progressive) {
      per_task([&](const Task& k, TaskBuf& b) {
        GlobalMax(k, b);
        mhat[static_cast<size_t>(&b - bufs.data())] = b.m;
      });
      per_chunk([&](const Task& k, TaskBuf& b, int c, AttentionSparseCounts& cnt) {
        RecomputeChunk(tab, a, k, b, c, mhat[static_cast<size_t>(&b - bufs.data())].data(), cnt);
      });
    }
    per_task([&](const Task& k, TaskBuf& b) { GlobalMax(k, b); });
    per_chunk([&](const Task& k, TaskBuf& b, int c, AttentionSparseCounts&) { ExpChunk(k, b, c); });
    per_task([&](const Task& k, TaskBuf& b) { GlobalSum(k, b); });
    per_chunk([&](const Task& k, TaskBuf& b, int c, AttentionSparseCounts& cnt) {
      ValueChunk(tab, a, k, b, c, b.acc.data() + int64_t{c} * k.nh * head_dim, cnt);
    });
    pool->ParallelFor(n_tasks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        Finish(tab, a, tasks[static_cast<size_t>(i)], bufs[static_cast<size_t>(i)]);
    });
    for (const AttentionSparseCounts& c : item_counts) total.Add(c);
  }
  if (counts) counts->Add(total);
}

}  // namespace ferry::kernels
