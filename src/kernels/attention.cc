// Causal attention over block-table KV with online softmax (FlashAttention-2 style: query
// tiles x key tiles, running max and sum, no n_q x n_keys matrix), split along the sequence
// (flash-decoding) when there are few tasks.
//
// Keys are cut into chunks of kKvChunk positions at absolute multiples of kKvChunk. Each chunk
// yields a partial softmax (max m, sum l, unnormalized p*v accumulator); the chunks of a
// (query, head) are then merged in chunk order, the first chunk taken as is. Inside a chunk,
// key tiles of kKeyTile start every kKeyTile keys; a tile spanning KV blocks is scored and
// summed block run by block run, in key order. So the arithmetic of a (query, head) pair --
// chunks, tiles, rescales, merge order -- is a function of its position only: never of the KV
// block size, n_q, the batch, the query tile, head grouping or thread count. The micro-kernels
// (dispatch.h attn_scores / attn_softmax / attn_pv / attn_pv_int) keep that: a row's sums never
// depend on the rows beside it, and a key past a query's position gets p = 0, which leaves its
// accumulator bit-identical (attn_pv_int: adds nothing to its integer sums or its weights'
// max). A sliding window (AttentionVariant) masks the keys before it within the same tiles
// (score -inf, so p = 0) and skips tiles and chunks wholly before it: the tiling stays a
// function of position alone. A tile's rows (query x head) are scored against the key tile
// together, so one loaded K or V row feeds several rows from registers.
// Both schedules below run exactly that arithmetic, so their bits agree:
//  - many tasks (prefill): a task is a query tile (up to kMaxQueryTile consecutive queries of
//    the call) x a group of heads sharing a KV head. It walks the key tiles once for all its
//    rows (query x head), so each K/V row is read once per tile instead of once per query, and
//    merges chunk partials as it goes;
//  - few tasks (decode, batch 1): every (query, head group, chunk) is a parallel item writing
//    its partial to scratch, then each (query, group) merges its partials in chunk order, so
//    one long sequence still keeps every thread busy. Its rows are the group's heads of one
//    query: the same micro-kernels, the same bits.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {
namespace {

constexpr int kKeyTile = 64;        // keys scored before one rescale of the accumulator
constexpr int kKvChunk = 256;       // keys per partial softmax (split unit along the sequence)
constexpr int kMaxGroup = 64;       // heads processed together
constexpr int kMaxQueryTile = 8;    // queries per task
constexpr int kPrefetchKeys = 128;  // keys whose K and V rows are requested ahead of the keys scored
constexpr int kPrefetchStep = 16;   // keys scored per batch of those requests
constexpr int kTileRows = 32;       // target rows (queries x heads) per task: Q, S, acc fit L1/L2
static_assert(kKeyTile <= internal::kAttnPvIntMaxKeys, "attn_pv_int takes a whole key tile");
// Below this many multiply-adds per pass (sum of keys x heads x head_dim) a call runs on the
// calling thread: waking the pool costs more than it saves (a decode step of short sequences
// calls Attention once per sequence). Threads never change the bits, so this is safe.
constexpr int64_t kMinParallelWork = int64_t{1} << 17;

struct AttnArgs {
  const float* q;
  const int32_t* q_pos;
  int n_heads, head_dim, group;  // group = query heads per KV head
  int v_dim;                     // values per V row (kv.ValueDim: head_dim, or MLA's latent width)
  int64_t k_row, v_row;          // bytes of one head row of K / of the v_dim values read of V
  int64_t k_stride, v_stride;    // bytes per token slot: n_kv_heads * k_row / v_row (v_in_k: k_stride)
  int64_t v_head;                // bytes from one KV head's V row to the next
  float scale;
  AttentionVariant variant;
  const KvBlocks* kv;
  size_t q_bytes;                 // bytes of a query row in the K type's form; 0: the f32 row
  internal::AttnScoresFn scores;  // the K type's micro-kernel
  internal::AttnPvFn pv;          // the V type's
  internal::AttnPvIntFn pv_int;   // the V type's integer P.V, null if it has none
  float* out;
};

// Queries t0..t0+nq-1 (call order) x heads h0..h0+nh-1 (one KV head): row r = qi * nh + i.
struct Task {
  int t0, nq, h0, nh;
};

// A partial softmax of R rows: m, l: [R]; acc: [R, v_dim].
struct Partial {
  float* m;
  float* l;
  float* acc;
};

// Per-thread scratch of a task of up to R rows, O(tile) (never n_q x n_keys):
//   s:     [R, kKeyTile] scores, then probabilities, of one key tile
//   q_form: [R, q_bytes] the task's query rows in the K type's form (when it has one)
//   q_rows, acc_rows: [R] pointers of the rows active in the current key tile
//   ids:   [R] their task row indices; n_valid: [R] their keys in the tile, of which the first
//          n_masked: [R] are before the row's sliding window
//   run, part: partial softmaxes of R rows ([R] m, [R] l, [R, v_dim] acc each)
//   v_rows: [kKeyTile] the V rows of a key tile's keys (integer P.V)
struct Scratch {
  std::vector<float> s;
  std::vector<std::byte> q_form;
  std::vector<const void*> q_rows;
  std::vector<float*> acc_rows;
  std::vector<int> ids, n_valid, n_masked;
  std::vector<float> run_data, part_data;
  std::vector<const uint8_t*> v_rows;
  Partial run, part;

  Scratch(int rows, int hd, size_t q_bytes)
      : s(static_cast<size_t>(rows) * kKeyTile),
        q_form(static_cast<size_t>(rows) * q_bytes),
        q_rows(rows),
        acc_rows(rows),
        ids(rows),
        n_valid(rows),
        n_masked(rows),
        run_data(static_cast<size_t>(rows) * (hd + 2)),
        part_data(static_cast<size_t>(rows) * (hd + 2)),
        v_rows(kKeyTile) {
    run = Partial{run_data.data(), run_data.data() + rows, run_data.data() + 2 * rows};
    part = Partial{part_data.data(), part_data.data() + rows, part_data.data() + 2 * rows};
  }
};

int NumChunks(int n_keys) {
  return (n_keys + kKvChunk - 1) / kKvChunk;
}

// Keys [KeyLo, KeyHi) of query t: all up to its position, or its sliding window.
int KeyHi(const AttnArgs& a, int t) {
  return a.q_pos[t] + 1;
}
int KeyLo(const AttnArgs& a, int t) {
  return a.variant.window > 0 ? std::max(0, KeyHi(a, t) - a.variant.window) : 0;
}
int FirstChunk(const AttnArgs& a, int t) {
  return KeyLo(a, t) / kKvChunk;
}
// Whether query t has keys in chunk c.
bool ReachesChunk(const AttnArgs& a, int t, int c) {
  return KeyHi(a, t) > c * kKvChunk && KeyLo(a, t) < (c + 1) * kKvChunk;
}

// Soft-capping of one row's n scores (gemma2), then the keys before its window set to -inf
// (p = 0 in the softmax, whose exp maps -inf to exactly 0 on every table).
void ShapeScores(const internal::KernelTable& tab, const AttentionVariant& v, float* s, int n, int n_masked) {
  if (v.logit_softcap > 0.f) tab.softcap(s, n, v.logit_softcap);
  std::fill(s, s + n_masked, -std::numeric_limits<float>::infinity());
}

// Calls f(first key, keys, their K rows, their V rows) for the runs of keys of [from, to) that
// lie in one KV block (rows n_kv_heads apart, contiguous in the block), in key order; k_cache,
// v_cache: one KV head's first rows.
template <typename F>
[[gnu::always_inline]] inline void ForBlockRuns(const AttnArgs& a, const uint8_t* k_cache,
                                                const uint8_t* v_cache, int from, int to, F&& f) {
  const KvBlocks& kv = *a.kv;
  for (int pos = from; pos < to;) {
    const int blk0 = pos / kv.block_size * kv.block_size;
    const int end = std::min(to, blk0 + kv.block_size);
    const int64_t slot = int64_t{kv.block_table[blk0 / kv.block_size]} * kv.block_size + (pos - blk0);
    f(pos, end - pos, k_cache + slot * a.k_stride, v_cache + slot * a.v_stride);
    pos = end;
  }
}

// Requests the K and V rows of one KV head at positions [from, to) into L2. A task reads one
// row per token slot, n_kv_heads rows apart, which the hardware prefetchers do not follow, so
// the tile loop keeps kPrefetchKeys keys requested ahead. Into L2, not L1: a hundred keys' rows
// in flight to L1 stall the loads (decode at depth 4096, every layer's cache from DRAM: 1.5-1.7x
// slower than into L2). Inlined: as a function of its own GCC takes it for one without side
// effects (a prefetch has none it models) and deletes the calls.
[[gnu::always_inline]] inline void PrefetchKeys(const AttnArgs& a, const uint8_t* k_cache,
                                                const uint8_t* v_cache, int from, int to) {
  auto request = [&](int, int n, const uint8_t* k_rows, const uint8_t* v_rows)
      __attribute__((always_inline)) {
    for (int j = 0; j < n; ++j) {
      for (int64_t b = 0; b < a.k_row; b += 64) __builtin_prefetch(k_rows + j * a.k_stride + b, 0, 2);
      if (a.kv->v_in_k > 0) continue;  // the values are in the K row
      for (int64_t b = 0; b < a.v_row; b += 64) __builtin_prefetch(v_rows + j * a.v_stride + b, 0, 2);
    }
  };
  ForBlockRuns(a, k_cache, v_cache, from, to, request);
}

// The task's query rows in the K type's form, once per task (not per key tile), row r = qi * nh + i.
void PrepareQueries(const internal::KernelTable& tab, const AttnArgs& a, const Task& task, Scratch& w) {
  if (a.q_bytes == 0) return;
  for (int qi = 0; qi < task.nq; ++qi)
    for (int i = 0; i < task.nh; ++i)
      internal::PrepareAttnQuery(
          tab, a.kv->k_type,
          a.q + (static_cast<int64_t>(task.t0 + qi) * a.n_heads + task.h0 + i) * a.head_dim, a.head_dim,
          w.q_form.data() + static_cast<size_t>(qi * task.nh + i) * a.q_bytes);
}

// The rows of `task` whose queries reach chunk c attend its keys -> p (rows indexed as the
// task's; rows not reaching chunk c are left untouched). Returns whether any row did. Rows are
// requested ahead up to the chunk's end, or up to the task's last key when `prefetch_on` (the
// caller goes on to the next chunk: the non-split schedule).
bool AttendChunk(const internal::KernelTable& tab, const AttnArgs& a, const Task& task, int c,
                 const Partial& p, Scratch& w, bool prefetch_on) {
  const int hd = a.head_dim, dv = a.v_dim, nh = task.nh;
  const int k0 = c * kKvChunk;
  int k_end = k0;  // the furthest key any row reads in this chunk
  for (int qi = 0; qi < task.nq; ++qi) {
    if (!ReachesChunk(a, task.t0 + qi, c)) continue;
    k_end = std::max(k_end, std::min(KeyHi(a, task.t0 + qi), k0 + kKvChunk));
    for (int i = 0; i < nh; ++i) {
      const int r = qi * nh + i;
      p.m[r] = -std::numeric_limits<float>::infinity();
      p.l[r] = 0.f;
      std::fill(p.acc + static_cast<int64_t>(r) * dv, p.acc + static_cast<int64_t>(r + 1) * dv, 0.f);
    }
  }
  if (k_end == k0) return false;
  int prefetch_end = k_end, fetched = k0;  // rows up to `fetched` are requested
  if (prefetch_on)
    for (int qi = 0; qi < task.nq; ++qi) prefetch_end = std::max(prefetch_end, KeyHi(a, task.t0 + qi));
  const KvBlocks& kv = *a.kv;
  const int kvh = task.h0 / a.group;
  const uint8_t* k_cache = static_cast<const uint8_t*>(kv.k_cache) + kvh * a.k_row;
  const uint8_t* v_cache =
      static_cast<const uint8_t*>(kv.v_in_k > 0 ? kv.k_cache : kv.v_cache) + kvh * a.v_head;
  for (int p0 = k0; p0 < k_end; p0 += kKeyTile) {
    const int p1 = std::min(k_end, p0 + kKeyTile);
    // Rows with keys in [p0, p1); n = p1 - p0 (the row with the furthest query reads all).
    // Tiles keep their places whatever the window: a window only masks keys within them.
    int na = 0, lo_min = p1;  // lo_min: the first key any row's window holds
    for (int qi = 0; qi < task.nq; ++qi) {
      const int t = task.t0 + qi;
      const int n_keys = KeyHi(a, t), lo = KeyLo(a, t);
      if (n_keys <= p0 || lo >= p1) continue;
      lo_min = std::min(lo_min, lo);
      for (int i = 0; i < nh; ++i) {
        const int r = qi * nh + i;
        w.ids[na] = r;
        w.n_valid[na] = std::min(n_keys, p1) - p0;
        w.n_masked[na] = std::max(0, lo - p0);
        w.q_rows[na] = a.q_bytes > 0 ? static_cast<const void*>(w.q_form.data() + r * a.q_bytes)
                                     : a.q + (static_cast<int64_t>(t) * a.n_heads + task.h0 + i) * hd;
        w.acc_rows[na] = p.acc + static_cast<int64_t>(r) * dv;
        ++na;
      }
    }
    if (na == 0) continue;  // the whole tile is before every row's window
    const int n = p1 - p0;
    // Keys before every row's window are neither read nor scored (a sliding layer may have
    // freed their blocks): ShapeScores gives them -inf, so p = 0, in every row.
    const int first = std::max(p0, lo_min);
    // A (row, key) score never depends on the keys scored beside it, so a tile is scored in runs
    // of at most kPrefetchStep keys within one KV block, each after the rows kPrefetchKeys
    // further on are requested: a steady trickle of requests, not a tile's worth at once.
    ForBlockRuns(a, k_cache, v_cache, first, p1, [&](int pos, int nk, const uint8_t* k_rows, const uint8_t*) {
      for (int j = 0; j < nk; j += kPrefetchStep) {
        const int ahead = std::min(prefetch_end, pos + j + kPrefetchStep + kPrefetchKeys);
        if (ahead > fetched) {
          PrefetchKeys(a, k_cache, v_cache, std::max(fetched, pos + j), ahead);
          fetched = ahead;
        }
        a.scores(w.q_rows.data(), na, k_rows + j * a.k_stride, a.k_stride, std::min(kPrefetchStep, nk - j),
                 hd, a.scale, w.s.data() + (pos + j - p0), kKeyTile);
      }
    });
    for (int x = 0; x < na; ++x) {  // online softmax; keys past a row's query get p = 0
      const int r = w.ids[x];
      if (a.variant.logit_softcap > 0.f || w.n_masked[x] > 0)
        ShapeScores(tab, a.variant, w.s.data() + static_cast<int64_t>(x) * kKeyTile, w.n_valid[x],
                    w.n_masked[x]);
      float tile_sum;
      const float c = tab.attn_softmax(w.s.data() + static_cast<int64_t>(x) * kKeyTile, w.n_valid[x], n,
                                       &p.m[r], &tile_sum);
      if (c != 1.f) tab.scale(w.acc_rows[x], c, dv);  // the max grew: rescale (exact skip when c = 1)
      p.l[r] = p.l[r] * c + tile_sum;
    }
    if (a.pv_int) {
      // Integer P.V scales each row's weights per call: one call per tile, its V rows gathered
      // across KV blocks, so block boundaries never change the bits (keys before `first` have
      // p = 0 in every row, so leaving them out changes nothing either).
      int nk = 0;
      ForBlockRuns(a, k_cache, v_cache, first, p1,
                   [&](int, int n_run, const uint8_t*, const uint8_t* v_rows) {
                     for (int j = 0; j < n_run; ++j) w.v_rows[nk++] = v_rows + j * a.v_stride;
                   });
      a.pv_int(w.s.data() + (first - p0), kKeyTile, na, w.v_rows.data(), nk, dv, w.acc_rows.data());
    } else {
      // P.V adds key by key in key order, so run by run gives the same sums as the whole tile.
      ForBlockRuns(
          a, k_cache, v_cache, first, p1, [&](int pos, int nk, const uint8_t*, const uint8_t* v_rows) {
            a.pv(w.s.data() + (pos - p0), kKeyTile, na, v_rows, a.v_stride, nk, dv, w.acc_rows.data());
          });
    }
  }
  return true;
}

// Row r: run = run (+) part, the exact merge of two partial softmaxes (each has >= 1 key, so m
// is finite): both rescaled to the larger max, sums and accumulators added.
void MergeRow(const internal::KernelTable& tab, int r, int hd, const Partial& run, const Partial& part) {
  const float mx = std::max(run.m[r], part.m[r]);
  const float cr = std::exp(run.m[r] - mx), cp = std::exp(part.m[r] - mx);
  float* ra = run.acc + static_cast<int64_t>(r) * hd;
  tab.scale(ra, cr, hd);
  tab.axpy(cp, part.acc + static_cast<int64_t>(r) * hd, ra, hd);
  run.l[r] = run.l[r] * cr + part.l[r] * cp;
  run.m[r] = mx;
}

// Merges the rows of `task` that reached chunk c into run; a row's first chunk is copied.
void MergeChunk(const internal::KernelTable& tab, const AttnArgs& a, const Task& task, int c,
                const Partial& run, const Partial& part) {
  const int hd = a.v_dim;
  for (int qi = 0; qi < task.nq; ++qi) {
    if (!ReachesChunk(a, task.t0 + qi, c)) continue;
    const bool first = c == FirstChunk(a, task.t0 + qi);
    for (int i = 0; i < task.nh; ++i) {
      const int r = qi * task.nh + i;
      if (!first) {
        MergeRow(tab, r, hd, run, part);
        continue;
      }
      run.m[r] = part.m[r];
      run.l[r] = part.l[r];
      std::copy_n(part.acc + static_cast<int64_t>(r) * hd, hd, run.acc + static_cast<int64_t>(r) * hd);
    }
  }
}

void Finish(const AttnArgs& a, const Task& task, const Partial& run) {
  const int hd = a.v_dim;
  for (int qi = 0; qi < task.nq; ++qi) {
    for (int i = 0; i < task.nh; ++i) {
      const int r = qi * task.nh + i;
      float* o = a.out + (static_cast<int64_t>(task.t0 + qi) * a.n_heads + task.h0 + i) * hd;
      float l = run.l[r], acc_scale = 1.0f;
      if (a.variant.sinks) {  // the sink joins the denominator (llama.cpp's flash-attention order)
        const float sink = a.variant.sinks[task.h0 + i], m = run.m[r];
        if (sink > m) {
          acc_scale = std::exp(m - sink);
          l = l * acc_scale + 1.0f;
        } else {
          l += std::exp(sink - m);
        }
      }
      const float inv = l > 0.f ? acc_scale / l : 0.f;
      for (int d = 0; d < hd; ++d) o[d] = run.acc[static_cast<int64_t>(r) * hd + d] * inv;
    }
  }
}

}  // namespace

void Attention(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
               float scale, const KvBlocks& kv, float* out, ThreadPool* pool,
               const AttentionVariant& variant) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const int dv = kv.ValueDim(head_dim);
  FERRY_CHECK(KvTypeFits(kv.k_type, head_dim) && KvTypeFits(kv.v_type, dv) && dv <= head_dim);
  FERRY_CHECK(kv.v_in_k == 0 || kv.v_type == kv.k_type);
  const int64_t k_row = static_cast<int64_t>(KvRowBytes(kv.k_type, head_dim));
  const int64_t v_row = static_cast<int64_t>(KvRowBytes(kv.v_type, dv));
  const AttnArgs a{q,
                   q_pos,
                   n_heads,
                   head_dim,
                   n_heads / n_kv_heads,
                   dv,
                   k_row,
                   v_row,
                   k_row * n_kv_heads,
                   kv.v_in_k > 0 ? k_row * n_kv_heads : v_row * n_kv_heads,
                   kv.v_in_k > 0 ? k_row : v_row,
                   scale,
                   variant,
                   &kv,
                   internal::AttnQueryBytes(kv.k_type, head_dim),
                   tab.attn_scores[static_cast<int>(kv.k_type)],
                   tab.attn_pv[static_cast<int>(kv.v_type)],
                   tab.attn_pv_int[static_cast<int>(kv.v_type)],
                   out};
  int max_chunks = 0;
  int64_t total_keys = 0;
  for (int t = 0; t < n_q; ++t) {
    max_chunks = std::max(max_chunks, NumChunks(q_pos[t] + 1));
    total_keys += KeyHi(a, t) - KeyLo(a, t);
  }
  if (total_keys * n_heads * head_dim < kMinParallelWork) pool = nullptr;
  const int threads = pool ? pool->size() : 1;
  // Heads per task: the whole GQA group when the tasks (times chunks, when splitting) still
  // give every thread two, else fewer (more parallelism, e.g. decode with few KV heads).
  auto pick_per_task = [&](int64_t units_per_head_task) {
    int per_task = std::min(a.group, kMaxGroup);
    while (per_task > 1 && (a.group % per_task != 0 ||
                            units_per_head_task * n_heads / per_task < 2 * static_cast<int64_t>(threads)))
      --per_task;
    return per_task;
  };
  const bool split =
      threads > 1 && max_chunks > 1 &&
      static_cast<int64_t>(n_q) * n_heads / std::min(a.group, kMaxGroup) < 2 * int64_t{threads};

  if (!split) {
    const int per_task = pick_per_task(n_q);
    const int tasks_per_tile = n_heads / per_task;
    // Queries per task: fill kTileRows rows, but keep two tasks per thread.
    int q_tile = std::clamp(kTileRows / per_task, 1, kMaxQueryTile);
    while (q_tile > 1 && static_cast<int64_t>((n_q + q_tile - 1) / q_tile) * tasks_per_tile < 2 * threads)
      --q_tile;
    const int n_tiles = (n_q + q_tile - 1) / q_tile;
    auto work = [&](int64_t begin, int64_t end) {
      Scratch w(q_tile * per_task, dv, a.q_bytes);
      for (int64_t idx = begin; idx < end; ++idx) {
        // Tiles taken from both ends in turn: a thread's contiguous range of tasks then mixes
        // short (early) and long (late) causal rows, balancing a whole prefill.
        const int i = static_cast<int>(idx / tasks_per_tile);
        const int t0 = (i % 2 == 0 ? i / 2 : n_tiles - 1 - i / 2) * q_tile;
        const Task task{t0, std::min(q_tile, n_q - t0), static_cast<int>(idx % tasks_per_tile) * per_task,
                        per_task};
        int c_end = 0;
        for (int t = task.t0; t < task.t0 + task.nq; ++t) c_end = std::max(c_end, NumChunks(KeyHi(a, t)));
        PrepareQueries(tab, a, task, w);
        for (int c = 0; c < c_end; ++c)
          if (AttendChunk(tab, a, task, c, w.part, w, /*prefetch_on=*/true))
            MergeChunk(tab, a, task, c, w.run, w.part);
        Finish(a, task, w.run);
      }
    };
    const int64_t n_tasks = static_cast<int64_t>(n_tiles) * tasks_per_tile;
    if (pool && threads > 1) {
      pool->ParallelFor(n_tasks, work);
    } else {
      work(0, n_tasks);
    }
    return;
  }

  // Split schedule: item = (query, head task, chunk), partials in scratch, merged in order.
  const int per_task = pick_per_task(static_cast<int64_t>(n_q) * max_chunks);
  const int tasks_per_q = n_heads / per_task;
  const int64_t part_floats = static_cast<int64_t>(per_task) * (dv + 2);
  const int64_t n_items = static_cast<int64_t>(n_q) * tasks_per_q * max_chunks;
  std::vector<float> parts(static_cast<size_t>(n_items * part_floats));  // [n_items, part_floats]
  auto part_at = [&](int64_t item) {
    float* p = parts.data() + item * part_floats;
    return Partial{p, p + per_task, p + 2 * per_task};
  };
  auto task_of = [&](int64_t task) {
    return Task{static_cast<int>(task / tasks_per_q), 1, static_cast<int>(task % tasks_per_q) * per_task,
                per_task};
  };
  pool->ParallelFor(n_items, [&](int64_t begin, int64_t end) {
    Scratch w(per_task, dv, a.q_bytes);
    int64_t prepared = -1;  // the task whose queries w.q_form holds
    for (int64_t item = begin; item < end; ++item) {
      const Task task = task_of(item / max_chunks);
      if (item / max_chunks != prepared) PrepareQueries(tab, a, task, w);
      prepared = item / max_chunks;
      AttendChunk(tab, a, task, static_cast<int>(item % max_chunks), part_at(item), w, /*prefetch_on=*/false);
    }
  });
  pool->ParallelFor(static_cast<int64_t>(n_q) * tasks_per_q, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const Task task = task_of(t);
      const int c0 = FirstChunk(a, task.t0);  // its partial is the run the later chunks merge into
      const Partial run = part_at(t * max_chunks + c0);
      for (int c = c0 + 1; c < NumChunks(KeyHi(a, task.t0)); ++c)
        MergeChunk(tab, a, task, c, run, part_at(t * max_chunks + c));
      Finish(a, task, run);
    }
  });
}

}  // namespace ferry::kernels
