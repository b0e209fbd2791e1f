// Causal attention over block-table KV with online softmax (FlashAttention-style running max
// and sum; no n_q x n_keys matrix). The heads that share a KV head (GQA) are processed
// together, key tile by key tile, so each K/V row is read from memory once per group and then
// hits L1 for the other heads. The arithmetic of each (query, head) pair -- its dot products,
// the key tiles (64 keys, aligned to absolute positions within each block), rescales and
// accumulation order -- depends only on that pair's inputs, never on n_q, on how heads are
// grouped into tasks or on the thread count, so results are bit-identical in any batch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {
namespace {

constexpr int kKeyTile = 64;  // keys scored before one rescale of the accumulator

struct AttnArgs {
  const float* q;
  const int32_t* q_pos;
  int n_heads, head_dim, group;  // group = query heads per KV head
  int64_t kv_stride;             // floats per token slot: n_kv_heads * head_dim
  float scale;
  const KvBlocks* kv;
  float* out;
};

// Heads h0..h0+nh-1 (all reading KV head kvh) of query t.
//   acc: [nh, head_dim] running sums of p*v; s: [nh, kKeyTile] scores of one tile.
void AttendHeads(const internal::KernelTable& tab, const AttnArgs& a, int t, int h0, int nh, int kvh, float* acc,
                 float* s) {
  const int hd = a.head_dim;
  float m[64], l[64];  // nh <= 64 (checked by the caller)
  for (int i = 0; i < nh; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.f;
  }
  std::fill(acc, acc + static_cast<int64_t>(nh) * hd, 0.f);
  const float* qv = a.q + (static_cast<int64_t>(t) * a.n_heads + h0) * hd;  // [nh, hd]
  const KvBlocks& kv = *a.kv;
  const int n_keys = a.q_pos[t] + 1;
  for (int blk0 = 0; blk0 < n_keys; blk0 += kv.block_size) {
    const int64_t phys = kv.block_table[blk0 / kv.block_size];
    const int blk_end = std::min(n_keys, blk0 + kv.block_size);
    const int64_t base = (phys * kv.block_size) * a.kv_stride + static_cast<int64_t>(kvh) * hd;
    for (int p0 = blk0; p0 < blk_end; p0 += kKeyTile) {
      const int p1 = std::min(blk_end, p0 + kKeyTile);
      for (int p = p0; p < p1; ++p) {
        const float* k = kv.k_cache + base + (p - blk0) * a.kv_stride;
        for (int i = 0; i < nh; ++i) s[i * kKeyTile + (p - p0)] = tab.dot_f32(qv + i * hd, k, hd) * a.scale;
      }
      for (int i = 0; i < nh; ++i) {
        float tile_max = -std::numeric_limits<float>::infinity();
        for (int p = p0; p < p1; ++p) tile_max = std::max(tile_max, s[i * kKeyTile + (p - p0)]);
        if (tile_max > m[i]) {
          const float c = std::exp(m[i] - tile_max);  // 0 on the first tile (m = -inf)
          tab.scale(acc + i * hd, c, hd);
          l[i] *= c;
          m[i] = tile_max;
        }
        for (int p = p0; p < p1; ++p) {
          float& sp = s[i * kKeyTile + (p - p0)];
          sp = std::exp(sp - m[i]);
          l[i] += sp;
        }
      }
      for (int p = p0; p < p1; ++p) {
        const float* v = kv.v_cache + base + (p - blk0) * a.kv_stride;
        for (int i = 0; i < nh; ++i) tab.axpy(s[i * kKeyTile + (p - p0)], v, acc + i * hd, hd);
      }
    }
  }
  for (int i = 0; i < nh; ++i) {
    float* o = a.out + (static_cast<int64_t>(t) * a.n_heads + h0 + i) * hd;
    const float inv = l[i] > 0.f ? 1.0f / l[i] : 0.f;
    for (int d = 0; d < hd; ++d) o[d] = acc[i * hd + d] * inv;
  }
}

}  // namespace

void Attention(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim, float scale,
               const KvBlocks& kv, float* out, ThreadPool* pool) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const AttnArgs a{q, q_pos, n_heads, head_dim, n_heads / n_kv_heads, static_cast<int64_t>(n_kv_heads) * head_dim,
                   scale, &kv, out};
  // Tasks of `per_task` heads of one KV group: the whole group when that still gives every
  // thread two tasks, else single heads (more parallelism, e.g. decode with few KV heads).
  const int threads = pool ? pool->size() : 1;
  int per_task = std::min(a.group, 64);
  while (per_task > 1 && (a.group % per_task != 0 ||
                          static_cast<int64_t>(n_q) * n_heads / per_task < 2 * static_cast<int64_t>(threads)))
    --per_task;
  const int tasks_per_q = n_heads / per_task;
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(per_task) * head_dim);  // [per_task, head_dim]
    std::vector<float> s(static_cast<size_t>(per_task) * kKeyTile);    // [per_task, kKeyTile]
    for (int64_t idx = begin; idx < end; ++idx) {
      const int t = static_cast<int>(idx / tasks_per_q);
      const int h0 = static_cast<int>(idx % tasks_per_q) * per_task;
      AttendHeads(tab, a, t, h0, per_task, h0 / a.group, acc.data(), s.data());
    }
  };
  const int64_t n_tasks = static_cast<int64_t>(n_q) * tasks_per_q;
  if (pool && pool->size() > 1) {
    pool->ParallelFor(n_tasks, work);
  } else {
    work(0, n_tasks);
  }
}

}  // namespace ferry::kernels
