// Causal attention over block-table KV with online softmax (FlashAttention-style running max
// and sum; no n_q x n_keys matrix), split along the sequence (flash-decoding).
//
// Keys are cut into chunks of kKvChunk positions at absolute multiples of kKvChunk. Each chunk
// yields a partial softmax (max m, sum l, unnormalized p*v accumulator); the chunks of a
// (query, head) are then merged in chunk order, the first chunk taken as is. Inside a chunk,
// key tiles of kKeyTile start at the chunk start and at each KV block start. So the arithmetic
// of a (query, head) pair -- chunks, tiles, rescales, merge order -- is a function of its
// position and the block size only: never of n_q, the batch, head grouping or thread count.
// Both schedules below run exactly that arithmetic, so their bits agree:
//  - many (query, head-group) tasks (prefill): each task walks its chunks and merges as it goes;
//  - few tasks (decode, batch 1): every (query, group, chunk) is a parallel item writing its
//    partial to scratch, then each (query, group) merges its partials in chunk order, so one
//    long sequence still keeps every thread busy.
// GQA: the heads sharing a KV head are processed together, key tile by key tile, so each K/V
// row is read from memory once per group and then hits L1 for the other heads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {
namespace {

constexpr int kKeyTile = 64;   // keys scored before one rescale of the accumulator
constexpr int kKvChunk = 256;  // keys per partial softmax (split unit along the sequence)
constexpr int kMaxGroup = 64;  // heads processed together

struct AttnArgs {
  const float* q;
  const int32_t* q_pos;
  int n_heads, head_dim, group;  // group = query heads per KV head
  int64_t kv_stride;             // floats per token slot: n_kv_heads * head_dim
  float scale;
  const KvBlocks* kv;
  float* out;
};

// A partial softmax of nh heads: m, l: [nh]; acc: [nh, head_dim].
struct Partial {
  float* m;
  float* l;
  float* acc;
};

int NumChunks(int n_keys) {
  return (n_keys + kKvChunk - 1) / kKvChunk;
}

// Heads h0..h0+nh-1 (all reading KV head kvh) of query t over keys [k0, k1) -> p.
//   s: [nh, kKeyTile] scores of one tile.
void AttendChunk(const internal::KernelTable& tab, const AttnArgs& a, int t, int h0, int nh, int kvh, int k0,
                 int k1, const Partial& p, float* s) {
  const int hd = a.head_dim;
  float* m = p.m;
  float* l = p.l;
  float* acc = p.acc;
  for (int i = 0; i < nh; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.f;
  }
  std::fill(acc, acc + static_cast<int64_t>(nh) * hd, 0.f);
  const float* qv = a.q + (static_cast<int64_t>(t) * a.n_heads + h0) * hd;  // [nh, hd]
  const KvBlocks& kv = *a.kv;
  for (int pos = k0; pos < k1;) {
    const int blk0 = pos / kv.block_size * kv.block_size;
    const int64_t phys = kv.block_table[blk0 / kv.block_size];
    const int blk_end = std::min(k1, blk0 + kv.block_size);
    const int64_t base = (phys * kv.block_size) * a.kv_stride + static_cast<int64_t>(kvh) * hd;
    for (int p0 = pos; p0 < blk_end; p0 += kKeyTile) {
      const int p1 = std::min(blk_end, p0 + kKeyTile);
      for (int q = p0; q < p1; ++q) {
        const float* k = kv.k_cache + base + (q - blk0) * a.kv_stride;
        for (int i = 0; i < nh; ++i) s[i * kKeyTile + (q - p0)] = tab.dot_f32(qv + i * hd, k, hd) * a.scale;
      }
      for (int i = 0; i < nh; ++i) {
        float tile_max = -std::numeric_limits<float>::infinity();
        for (int q = p0; q < p1; ++q) tile_max = std::max(tile_max, s[i * kKeyTile + (q - p0)]);
        if (tile_max > m[i]) {
          const float c = std::exp(m[i] - tile_max);  // 0 on the first tile (m = -inf)
          tab.scale(acc + i * hd, c, hd);
          l[i] *= c;
          m[i] = tile_max;
        }
        for (int q = p0; q < p1; ++q) {
          float& sp = s[i * kKeyTile + (q - p0)];
          sp = std::exp(sp - m[i]);
          l[i] += sp;
        }
      }
      for (int q = p0; q < p1; ++q) {
        const float* v = kv.v_cache + base + (q - blk0) * a.kv_stride;
        for (int i = 0; i < nh; ++i) tab.axpy(s[i * kKeyTile + (q - p0)], v, acc + i * hd, hd);
      }
    }
    pos = blk_end;
  }
}

// run = run (+) part: the exact merge of two partial softmaxes (each has >= 1 key, so m is
// finite): both rescaled to the larger max, sums and accumulators added.
void Merge(const internal::KernelTable& tab, int nh, int hd, const Partial& run, const Partial& part) {
  for (int i = 0; i < nh; ++i) {
    const float mx = std::max(run.m[i], part.m[i]);
    const float cr = std::exp(run.m[i] - mx), cp = std::exp(part.m[i] - mx);
    float* ra = run.acc + static_cast<int64_t>(i) * hd;
    tab.scale(ra, cr, hd);
    tab.axpy(cp, part.acc + static_cast<int64_t>(i) * hd, ra, hd);
    run.l[i] = run.l[i] * cr + part.l[i] * cp;
    run.m[i] = mx;
  }
}

void Finish(const AttnArgs& a, int t, int h0, int nh, const Partial& run) {
  const int hd = a.head_dim;
  for (int i = 0; i < nh; ++i) {
    float* o = a.out + (static_cast<int64_t>(t) * a.n_heads + h0 + i) * hd;
    const float inv = run.l[i] > 0.f ? 1.0f / run.l[i] : 0.f;
    for (int d = 0; d < hd; ++d) o[d] = run.acc[static_cast<int64_t>(i) * hd + d] * inv;
  }
}

// Scratch for one partial of nh heads: [nh] m, [nh] l, [nh, hd] acc.
struct PartialBuf {
  std::vector<float> data;
  Partial Make(int nh, int hd) {
    data.resize(static_cast<size_t>(nh) * (hd + 2));
    return Partial{data.data(), data.data() + nh, data.data() + 2 * nh};
  }
};

}  // namespace

void Attention(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
               float scale, const KvBlocks& kv, float* out, ThreadPool* pool) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const AttnArgs a{
      q,     q_pos, n_heads, head_dim, n_heads / n_kv_heads, static_cast<int64_t>(n_kv_heads) * head_dim,
      scale, &kv,   out};
  const int threads = pool ? pool->size() : 1;
  int max_chunks = 0;
  for (int t = 0; t < n_q; ++t) max_chunks = std::max(max_chunks, NumChunks(q_pos[t] + 1));
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
    const int tasks_per_q = n_heads / per_task;
    auto work = [&](int64_t begin, int64_t end) {
      PartialBuf run_buf, part_buf;
      std::vector<float> s(static_cast<size_t>(per_task) * kKeyTile);  // [per_task, kKeyTile]
      const Partial run = run_buf.Make(per_task, head_dim), part = part_buf.Make(per_task, head_dim);
      for (int64_t idx = begin; idx < end; ++idx) {
        const int t = static_cast<int>(idx / tasks_per_q);
        const int h0 = static_cast<int>(idx % tasks_per_q) * per_task;
        const int n_keys = q_pos[t] + 1;
        for (int c = 0; c < NumChunks(n_keys); ++c) {
          const int k1 = std::min(n_keys, (c + 1) * kKvChunk);
          AttendChunk(tab, a, t, h0, per_task, h0 / a.group, c * kKvChunk, k1, c == 0 ? run : part, s.data());
          if (c > 0) Merge(tab, per_task, head_dim, run, part);
        }
        Finish(a, t, h0, per_task, run);
      }
    };
    const int64_t n_tasks = static_cast<int64_t>(n_q) * tasks_per_q;
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
  const int64_t part_floats = static_cast<int64_t>(per_task) * (head_dim + 2);
  const int64_t n_items = static_cast<int64_t>(n_q) * tasks_per_q * max_chunks;
  std::vector<float> parts(static_cast<size_t>(n_items * part_floats));  // [n_items, part_floats]
  auto part_at = [&](int64_t item) {
    float* p = parts.data() + item * part_floats;
    return Partial{p, p + per_task, p + 2 * per_task};
  };
  pool->ParallelFor(n_items, [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(per_task) * kKeyTile);  // [per_task, kKeyTile]
    for (int64_t item = begin; item < end; ++item) {
      const int c = static_cast<int>(item % max_chunks);
      const int64_t task = item / max_chunks;
      const int t = static_cast<int>(task / tasks_per_q);
      const int h0 = static_cast<int>(task % tasks_per_q) * per_task;
      const int n_keys = q_pos[t] + 1;
      if (c >= NumChunks(n_keys)) continue;
      AttendChunk(tab, a, t, h0, per_task, h0 / a.group, c * kKvChunk, std::min(n_keys, (c + 1) * kKvChunk),
                  part_at(item), s.data());
    }
  });
  pool->ParallelFor(static_cast<int64_t>(n_q) * tasks_per_q, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int t = static_cast<int>(task / tasks_per_q);
      const int h0 = static_cast<int>(task % tasks_per_q) * per_task;
      const Partial run = part_at(task * max_chunks);
      for (int c = 1; c < NumChunks(q_pos[t] + 1); ++c)
        Merge(tab, per_task, head_dim, run, part_at(task * max_chunks + c));
      Finish(a, t, h0, per_task, run);
    }
  });
}

}  // namespace ferry::kernels
