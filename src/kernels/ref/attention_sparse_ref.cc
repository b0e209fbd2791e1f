// Scalar truth for AttentionSparse: materialized scores and a double-precision softmax with
// the same skip and recompute rules (kernels.h AttentionSparsity), one (query, head) at a time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {

void AttentionSparseNaive(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads,
                          int head_dim, float scale, const KvBlocks& kv, const AttentionSparsity& sp,
                          float* out, AttentionSparseCounts* counts, double* skipped_mass) {
  const int group = std::max(1, n_heads / n_kv_heads);
  auto kv_of = [&](int h) { return sp.head_kv ? sp.head_kv[h] : h / group; };
  auto slot_of = [&](int p) {
    return static_cast<int64_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
  };
  AttentionSparseCounts cnt;
  for (int t = 0; t < n_q; ++t) {
    const int n_keys = q_pos[t] + 1;
    for (int h0 = 0; h0 < n_heads;) {  // one run of heads sharing a KV head
      const int kvh = kv_of(h0);
      int h1 = h0 + 1;
      while (h1 < n_heads && kv_of(h1) == kvh) ++h1;
      const int nh = h1 - h0;
      // s: [nh, n_keys] scores (double), w: the softmax weights.
      std::vector<double> s(static_cast<size_t>(nh) * n_keys), w(s.size());
      std::vector<float> k_buf(static_cast<size_t>(head_dim)), v_buf(k_buf.size());
      auto krow = [&](int p) {
        KvHeadRow(kv.k_type, kv.k_cache, slot_of(p) * n_kv_heads + kvh, head_dim, k_buf.data());
        return k_buf.data();
      };
      std::vector<std::vector<float>> q_read;  // [nh][head_dim] the queries as the scores read them
      for (int i = 0; i < nh; ++i)
        q_read.push_back(
            QueryAsRead(kv.k_type, q + (static_cast<int64_t>(t) * n_heads + h0 + i) * head_dim, head_dim));
      auto f32_score = [&](int i, int p) {
        const float* qv = q_read[static_cast<size_t>(i)].data();
        double d = 0;
        for (int j = 0; j < head_dim; ++j) d += static_cast<double>(qv[j]) * krow(p)[j];
        return d * scale;
      };
      for (int p = 0; p < n_keys; ++p)
        for (int i = 0; i < nh; ++i) s[static_cast<size_t>(i) * n_keys + p] = f32_score(i, p);
      cnt.k_rows += n_keys;
      if (sp.progressive) {
        // INT8 scores exactly as the kernel forms them (integer dot, then the float products).
        std::vector<float> lo(s.size()),
            mhat(static_cast<size_t>(nh), -std::numeric_limits<float>::infinity());
        std::vector<int8_t> q8(static_cast<size_t>(head_dim));
        for (int i = 0; i < nh; ++i) {
          const float qs = QuantizeActInt8(q + (static_cast<int64_t>(t) * n_heads + h0 + i) * head_dim,
                                           head_dim, 0.f, q8.data());
          for (int p = 0; p < n_keys; ++p) {
            const int64_t row = slot_of(p) * n_kv_heads + kvh;
            const float v = static_cast<float>(DotI8(kv.k_i8 + row * head_dim, q8.data(), head_dim)) *
                            (qs * kv.k_i8_scale[row]) * scale;
            lo[static_cast<size_t>(i) * n_keys + p] = v;
            mhat[static_cast<size_t>(i)] = std::max(mhat[static_cast<size_t>(i)], v);
          }
        }
        for (int p = 0; p < n_keys; ++p) {
          bool need = false;
          for (int i = 0; i < nh; ++i)
            need = need || lo[static_cast<size_t>(i) * n_keys + p] >=
                               mhat[static_cast<size_t>(i)] - sp.progressive_margin;
          if (need) {
            ++cnt.k_rows_f32;
          } else {
            for (int i = 0; i < nh; ++i)
              s[static_cast<size_t>(i) * n_keys + p] = lo[static_cast<size_t>(i) * n_keys + p];
          }
        }
      } else {
        cnt.k_rows_f32 += n_keys;
      }
      for (int i = 0; i < nh; ++i) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int p = 0; p < n_keys; ++p) mx = std::max(mx, s[static_cast<size_t>(i) * n_keys + p]);
        for (int p = 0; p < n_keys; ++p) sum += std::exp(s[static_cast<size_t>(i) * n_keys + p] - mx);
        for (int p = 0; p < n_keys; ++p)
          w[static_cast<size_t>(i) * n_keys + p] =
              std::exp(s[static_cast<size_t>(i) * n_keys + p] - mx) / sum;
      }
      std::vector<double> acc(static_cast<size_t>(nh) * head_dim, 0.0), lost(static_cast<size_t>(nh), 0.0);
      for (int p = 0; p < n_keys; ++p) {
        bool need = false;
        for (int i = 0; i < nh; ++i)
          need = need || w[static_cast<size_t>(i) * n_keys + p] >= sp.skip_threshold;
        if (!need) {
          ++cnt.v_rows_skipped;
          for (int i = 0; i < nh; ++i) lost[static_cast<size_t>(i)] += w[static_cast<size_t>(i) * n_keys + p];
          continue;
        }
        KvHeadRow(kv.v_type, kv.v_cache, slot_of(p) * n_kv_heads + kvh, head_dim, v_buf.data());
        const float* v = v_buf.data();
        for (int i = 0; i < nh; ++i)
          for (int j = 0; j < head_dim; ++j)
            acc[static_cast<size_t>(i) * head_dim + j] += w[static_cast<size_t>(i) * n_keys + p] * v[j];
      }
      cnt.v_rows += n_keys;
      for (int i = 0; i < nh; ++i) {
        float* o = out + (static_cast<int64_t>(t) * n_heads + h0 + i) * head_dim;
        for (int j = 0; j < head_dim; ++j)
          o[j] = static_cast<float>(acc[static_cast<size_t>(i) * head_dim + j]);
        if (skipped_mass)
          skipped_mass[static_cast<int64_t>(t) * n_heads + h0 + i] = lost[static_cast<size_t>(i)];
      }
      h0 = h1;
    }
  }
  if (counts) counts->Add(cnt);
}

}  // namespace ferry::kernels::ref
