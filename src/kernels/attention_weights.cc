// AccumulateAttentionWeights: the softmax weights of every (query, head) over its keys, summed
// per key, for KV caches that keep the most attended tokens (H2O). Exact softmax per row:
// the scores are kept ([n_keys] per row), so each K row is read once, in its stored type.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {

void AccumulateAttentionWeights(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads,
                                int head_dim, float scale, const KvBlocks& kv, float* acc) {
  if (n_q <= 0 || n_heads <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const internal::AttnScoresFn scores = tab.attn_scores[static_cast<int>(kv.k_type)];
  const int group = n_heads / n_kv_heads;
  const int64_t k_row = static_cast<int64_t>(KvRowBytes(kv.k_type, head_dim));
  const int64_t stride = k_row * n_kv_heads;                                     // bytes per token slot
  std::vector<float> s;                                                          // [n_keys] scores of one row
  std::vector<std::byte> q_form(internal::AttnQueryBytes(kv.k_type, head_dim));  // one row in K's form
  for (int t = 0; t < n_q; ++t) {
    const int n_keys = q_pos[t] + 1;
    s.resize(static_cast<size_t>(n_keys));
    for (int h = 0; h < n_heads; ++h) {
      const void* qv = internal::PrepareAttnQuery(
          tab, kv.k_type, q + (static_cast<int64_t>(t) * n_heads + h) * head_dim, head_dim, q_form.data());
      const uint8_t* k_head =
          static_cast<const uint8_t*>(kv.k_cache) + static_cast<int64_t>(h / group) * k_row;
      for (int p = 0; p < n_keys;) {  // one block's keys at a time, in the K type's micro-kernel
        const int64_t phys = kv.block_table[p / kv.block_size];
        const int end = std::min(n_keys, (p / kv.block_size + 1) * kv.block_size);
        scores(&qv, 1, k_head + (phys * kv.block_size + p % kv.block_size) * stride, stride, end - p,
               head_dim, scale, s.data() + p, n_keys);
        p = end;
      }
      float mx = -INFINITY;
      for (int p = 0; p < n_keys; ++p) mx = std::max(mx, s[static_cast<size_t>(p)]);
      double sum = 0;
      for (int p = 0; p < n_keys; ++p)
        sum += s[static_cast<size_t>(p)] = std::exp(s[static_cast<size_t>(p)] - mx);
      const float inv = static_cast<float>(1.0 / sum);
      for (int p = 0; p < n_keys; ++p) acc[p] += s[static_cast<size_t>(p)] * inv;
    }
  }
}

}  // namespace ferry::kernels
