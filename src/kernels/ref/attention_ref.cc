// Scalar attention micro-kernels (dispatch.h attn_scores / attn_pv): the truth the AVX2 ones
// are tested against. Each row's sums run in a fixed order (over d for a score, over keys for
// an output element) whatever the number of rows in the call.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {

void AttnScores(const float* const* q, int n_rows, const float* k, int64_t k_stride, int n_keys, int head_dim,
                float scale, float* s, int ld_s) {
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < n_keys; ++j) {
      const float* kj = k + j * k_stride;
      float sum = 0.f;
      for (int d = 0; d < head_dim; ++d) sum += q[r][d] * kj[d];
      s[static_cast<int64_t>(r) * ld_s + j] = sum * scale;
    }
  }
}

void AttnPv(const float* p, int ld_p, int n_rows, const float* v, int64_t v_stride, int n_keys, int head_dim,
            float* const* acc) {
  for (int r = 0; r < n_rows; ++r) {
    const float* pr = p + static_cast<int64_t>(r) * ld_p;
    for (int j = 0; j < n_keys; ++j) {
      const float* vj = v + j * v_stride;
      for (int d = 0; d < head_dim; ++d) acc[r][d] += pr[j] * vj[d];
    }
  }
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
