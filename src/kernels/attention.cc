// Causal attention over block-table KV with online softmax (FlashAttention-style running max
// and sum), one (query, head) pair per task. Per-pair arithmetic depends only on that pair's
// inputs, so results are independent of n_q and of the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {
namespace {
constexpr int kKeyTile = 64;  // keys scored before one rescale of the accumulator
}  // namespace

void Attention(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads,
               int head_dim, float scale, const KvBlocks& kv, float* out, ThreadPool* pool) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const int group = n_heads / n_kv_heads;
  const int64_t kv_stride = static_cast<int64_t>(n_kv_heads) * head_dim;  // floats per token slot

  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(head_dim));  // [head_dim] running sum of p*v
    float s[kKeyTile];                                       // [kKeyTile] scores of one tile
    for (int64_t idx = begin; idx < end; ++idx) {
      const int t = static_cast<int>(idx / n_heads);
      const int h = static_cast<int>(idx % n_heads);
      const int kvh = h / group;
      const float* qv = q + idx * head_dim;
      float* o = out + idx * head_dim;
      std::fill(acc.begin(), acc.end(), 0.f);
      float m = -std::numeric_limits<float>::infinity();
      float l = 0.f;
      const int n_keys = q_pos[t] + 1;
      for (int blk0 = 0; blk0 < n_keys; blk0 += kv.block_size) {
        const int64_t phys = kv.block_table[blk0 / kv.block_size];
        const int blk_end = std::min(n_keys, blk0 + kv.block_size);
        const int64_t base = (phys * kv.block_size) * kv_stride + static_cast<int64_t>(kvh) * head_dim;
        for (int p0 = blk0; p0 < blk_end; p0 += kKeyTile) {
          const int p1 = std::min(blk_end, p0 + kKeyTile);
          float tile_max = -std::numeric_limits<float>::infinity();
          for (int p = p0; p < p1; ++p) {
            const float* k = kv.k_cache + base + (p - blk0) * kv_stride;
            s[p - p0] = tab.dot_f32(qv, k, head_dim) * scale;
            tile_max = std::max(tile_max, s[p - p0]);
          }
          if (tile_max > m) {
            const float c = std::exp(m - tile_max);  // 0 on the first tile (m = -inf)
            tab.scale(acc.data(), c, head_dim);
            l *= c;
            m = tile_max;
          }
          for (int p = p0; p < p1; ++p) {
            const float pw = std::exp(s[p - p0] - m);
            l += pw;
            tab.axpy(pw, kv.v_cache + base + (p - blk0) * kv_stride, acc.data(), head_dim);
          }
        }
      }
      const float inv = l > 0.f ? 1.0f / l : 0.f;
      for (int d = 0; d < head_dim; ++d) o[d] = acc[d] * inv;
    }
  };
  const int64_t n_pairs = static_cast<int64_t>(n_q) * n_heads;
  if (pool && pool->size() > 1) {
    pool->ParallelFor(n_pairs, work);
  } else {
    work(0, n_pairs);
  }
}

}  // namespace ferry::kernels
