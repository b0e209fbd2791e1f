// Scalar attention micro-kernels (dispatch.h attn_scores / attn_pv / attn_softmax): the truth
// the SIMD tables are tested against, one per KV type. Each stored value is KvValue's (the
// dequantization every table reproduces exactly); each row's sums run in a fixed order (over d
// for a score, over keys for an output element) whatever the number of rows in the call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/kv_row.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {
namespace {

template <DType T>
void AttnScoresT(const void* const* q_form, int n_rows, const void* k, int64_t k_stride, int n_keys,
                 int head_dim, float scale, float* s, int ld_s) {
  const auto* const* q = reinterpret_cast<const float* const*>(q_form);  // the f32 rows themselves
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < n_keys; ++j) {
      const uint8_t* kj = static_cast<const uint8_t*>(k) + j * k_stride;
      float sum = 0.f;
      for (int d = 0; d < head_dim; ++d) sum += q[r][d] * KvValue<T>(kj, d);
      s[static_cast<int64_t>(r) * ld_s + j] = sum * scale;
    }
  }
}

// q8_0 / q4_0 K against the query rounded to q8_0 (dispatch.h PrepareAttnQuery): per block of
// 32 the exact int32 dot, then acc = fma(float(isum), dk * dq, acc) over the blocks in order.
template <DType T>
void AttnScoresIntT(const void* const* q_form, int n_rows, const void* k, int64_t k_stride, int n_keys,
                    int head_dim, float scale, float* s, int ld_s) {
  const int nb = head_dim / 32;
  const size_t block_bytes = kKvBlockBytes<T>;
  for (int r = 0; r < n_rows; ++r) {
    const auto* qb = static_cast<const block_q8_0*>(q_form[r]);
    const float* dq = internal::ActScales(q_form[r], nb, sizeof(block_q8_0));
    for (int j = 0; j < n_keys; ++j) {
      const uint8_t* kj = static_cast<const uint8_t*>(k) + j * k_stride;
      float acc = 0.f;
      for (int b = 0; b < nb; ++b) {
        const uint8_t* kb = kj + b * block_bytes;
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += KvQuantInt<T>(kb, i) * qb[b].qs[i];
        uint16_t h;
        std::memcpy(&h, kb, 2);
        acc = std::fma(static_cast<float>(isum), Fp16ToFp32(h) * dq[b], acc);
      }
      s[static_cast<int64_t>(r) * ld_s + j] = acc * scale;
    }
  }
}

template <DType T>
void AttnPvT(const float* p, int ld_p, int n_rows, const void* v, int64_t v_stride, int n_keys, int head_dim,
             float* const* acc) {
  for (int r = 0; r < n_rows; ++r) {
    const float* pr = p + static_cast<int64_t>(r) * ld_p;
    for (int j = 0; j < n_keys; ++j) {
      const uint8_t* vj = static_cast<const uint8_t*>(v) + j * v_stride;
      for (int d = 0; d < head_dim; ++d) acc[r][d] += pr[j] * KvValue<T>(vj, d);
    }
  }
}

// dispatch.h attn_pv_int: per row and V block, the weights rounded to int16 against their
// largest magnitude, exact int32 sums over the keys, one fma per output.
template <DType T>
void AttnPvIntT(const float* p, int ld_p, int n_rows, const uint8_t* const* v, int n_keys, int head_dim,
                float* const* acc) {
  const size_t block_bytes = kKvBlockBytes<T>;
  for (int r = 0; r < n_rows; ++r) {
    const float* pr = p + static_cast<int64_t>(r) * ld_p;
    for (int b = 0; b < head_dim / 32; ++b) {
      float w[internal::kAttnPvIntMaxKeys];  // [n_keys]
      float m = 0.f;
      for (int j = 0; j < n_keys; ++j) {
        uint16_t h;
        std::memcpy(&h, v[j] + b * block_bytes, 2);
        w[j] = pr[j] * Fp16ToFp32(h);
        m = std::max(m, std::fabs(w[j]));
      }
      if (!(m >= internal::kAttnPvIntMinWeight)) continue;
      const float inv = internal::kAttnPvIntLevels / m, s = m / internal::kAttnPvIntLevels;
      int32_t iw[internal::kAttnPvIntMaxKeys];  // [n_keys], each within +-32767
      for (int j = 0; j < n_keys; ++j) iw[j] = static_cast<int32_t>(std::nearbyint(w[j] * inv));
      for (int i = 0; i < 32; ++i) {
        int32_t isum = 0;
        for (int j = 0; j < n_keys; ++j) isum += iw[j] * KvQuantInt<T>(v[j] + b * block_bytes, i);
        float& out = acc[r][32 * b + i];
        out = std::fma(static_cast<float>(isum), s, out);
      }
    }
  }
}

}  // namespace

void FillAttention(internal::KernelTable& t) {
  for (DType type : kKvTypes)
    WithKvType(type, [&](auto tc) {
      if constexpr (tc.value == DType::kQ8_0 || tc.value == DType::kQ4_0) {
        t.attn_scores[static_cast<int>(type)] = AttnScoresIntT<tc.value>;
        t.attn_pv_int[static_cast<int>(type)] = AttnPvIntT<tc.value>;
      } else {
        t.attn_scores[static_cast<int>(type)] = AttnScoresT<tc.value>;
      }
      t.attn_pv[static_cast<int>(type)] = AttnPvT<tc.value>;
    });
  t.attn_softmax = AttnSoftmax;
}

float AttnSoftmax(float* s, int n, int n_tile, float* m, float* tile_sum) {
  float mx = *m;
  for (int j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  float sum = 0.f;
  for (int j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  std::fill(s + n, s + n_tile, 0.f);
  *tile_sum = sum;
  const float c = mx > *m ? std::exp(*m - mx) : 1.f;
  *m = mx;
  return c;
}

}  // namespace ferry::kernels::ref
