// AccumulateAttentionWeights: the softmax weights of every (query, head) over its keys, summed
// per key, for KV caches that keep the most attended tokens (H2O). Exact softmax per row:
// the scores are kept ([n_keys] per row), so each K row is read once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {

void AccumulateAttentionWeights(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads,
                                int head_dim, float scale, const KvBlocks& kv, float* acc) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const int group = n_heads / n_kv_heads;
  const int64_t stride = static_cast<int64_t>(n_kv_heads) * head_dim;  // floats per token slot
  std::vector<float> s;                                                // [n_keys] scores of one row
  for (int t = 0; t < n_q; ++t) {
    const int n_keys = q_pos[t] + 1;
    s.resize(static_cast<size_t>(n_keys));
    for (int h = 0; h < n_heads; ++h) {
      const float* qv = q + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      const int64_t head_off = static_cast<int64_t>(h / group) * head_dim;
      float mx = -INFINITY;
      for (int p = 0; p < n_keys; ++p) {
        const int64_t phys = kv.block_table[p / kv.block_size];
        const float* k = kv.k_cache + (phys * kv.block_size + p % kv.block_size) * stride + head_off;
        s[static_cast<size_t>(p)] = tab.dot_f32(qv, k, head_dim) * scale;
        mx = std::max(mx, s[static_cast<size_t>(p)]);
      }
      double sum = 0;
      for (int p = 0; p < n_keys; ++p)
        sum += s[static_cast<size_t>(p)] = std::exp(s[static_cast<size_t>(p)] - mx);
      const float inv = static_cast<float>(1.0 / sum);
      for (int p = 0; p < n_keys; ++p) acc[p] += s[static_cast<size_t>(p)] * inv;
    }
  }
}

}  // namespace ferry::kernels
