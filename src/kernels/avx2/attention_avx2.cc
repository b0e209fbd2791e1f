// AVX2+FMA attention micro-kernels (dispatch.h attn_scores / attn_pv), register-blocked so one
// loaded K or V row feeds several query rows. Every (row, key) score and every (row, dim)
// output runs the same instruction sequence whatever block it falls in: blocks only decide
// which rows share a load, so a row's bits never depend on n_rows (batch invariance).
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2/avx2.h"

namespace ferry::kernels::avx2 {
namespace {

// Lanes [0, n) set, n in 0..8.
inline __m256i LaneMask(int n) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}

// Lane sums of a, b, c, d into lanes 0..3, each by the same tree ((x01 + x23) + (x45 + x67)),
// so a sum does not depend on the vectors beside it.
inline __m128 Hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);      // a01 a23 b01 b23 | a45 a67 b45 b67
  const __m256 cd = _mm256_hadd_ps(c, d);      // c01 c23 d01 d23 | c45 c67 d45 d67
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // a0123 b0123 c0123 d0123 | a4567 b4567 ...
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// Scores of NR rows x 4 keys (k: 4 row pointers; the unused ones repeat a valid row and their
// results are dropped). Each (row, key) accumulates 8 lanes over d with FMAs in order, then Hsum4.
template <int NR>
void ScoresBlock(const float* const* q, const float* const* k, int nk, int hd, float scale, float* s,
                 int ld_s) {
  __m256 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
  int d = 0;
  for (; d + 8 <= hd; d += 8) {
    const __m256 k0 = _mm256_loadu_ps(k[0] + d), k1 = _mm256_loadu_ps(k[1] + d);
    const __m256 k2 = _mm256_loadu_ps(k[2] + d), k3 = _mm256_loadu_ps(k[3] + d);
    for (int r = 0; r < NR; ++r) {
      const __m256 qv = _mm256_loadu_ps(q[r] + d);
      acc[r][0] = _mm256_fmadd_ps(qv, k0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(qv, k1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(qv, k2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(qv, k3, acc[r][3]);
    }
  }
  if (d < hd) {  // ragged head_dim: zero lanes add exact zeros
    const __m256i m = LaneMask(hd - d);
    const __m256 k0 = _mm256_maskload_ps(k[0] + d, m), k1 = _mm256_maskload_ps(k[1] + d, m);
    const __m256 k2 = _mm256_maskload_ps(k[2] + d, m), k3 = _mm256_maskload_ps(k[3] + d, m);
    for (int r = 0; r < NR; ++r) {
      const __m256 qv = _mm256_maskload_ps(q[r] + d, m);
      acc[r][0] = _mm256_fmadd_ps(qv, k0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(qv, k1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(qv, k2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(qv, k3, acc[r][3]);
    }
  }
  const __m128 vs = _mm_set1_ps(scale);
  for (int r = 0; r < NR; ++r) {
    const __m128 sums = _mm_mul_ps(Hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]), vs);
    float* out = s + static_cast<int64_t>(r) * ld_s;
    if (nk == 4) {
      _mm_storeu_ps(out, sums);
    } else {
      alignas(16) float tmp[4];
      _mm_store_ps(tmp, sums);
      for (int j = 0; j < nk; ++j) out[j] = tmp[j];
    }
  }
}

// NR rows x W vectors (8 dims each) of acc from d: acc += p[r][j] * v[j] key by key.
// kMasked (W = 1): only the lanes of `tail` are loaded and stored (ragged head_dim).
template <int NR, int W, bool kMasked>
void PvBlock(const float* p, int ld_p, const float* v, int64_t v_stride, int n_keys, int d, __m256i tail,
             float* const* acc) {
  static_assert(!kMasked || W == 1);
  __m256 a[NR][W];
  for (int r = 0; r < NR; ++r)
    for (int w = 0; w < W; ++w)
      a[r][w] = kMasked ? _mm256_maskload_ps(acc[r] + d, tail) : _mm256_loadu_ps(acc[r] + d + 8 * w);
  for (int j = 0; j < n_keys; ++j) {
    const float* vj = v + j * v_stride + d;
    __m256 vv[W];
    for (int w = 0; w < W; ++w) vv[w] = kMasked ? _mm256_maskload_ps(vj, tail) : _mm256_loadu_ps(vj + 8 * w);
    for (int r = 0; r < NR; ++r) {
      const __m256 b = _mm256_broadcast_ss(p + static_cast<int64_t>(r) * ld_p + j);
      for (int w = 0; w < W; ++w) a[r][w] = _mm256_fmadd_ps(b, vv[w], a[r][w]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int w = 0; w < W; ++w) {
      if constexpr (kMasked) {
        _mm256_maskstore_ps(acc[r] + d, tail, a[r][w]);
      } else {
        _mm256_storeu_ps(acc[r] + d + 8 * w, a[r][w]);
      }
    }
}

template <int NR>
void PvRows(const float* p, int ld_p, const float* v, int64_t v_stride, int n_keys, int hd,
            float* const* acc) {
  const __m256i all = _mm256_set1_epi32(-1);
  int d = 0;
  for (; d + 16 <= hd; d += 16) PvBlock<NR, 2, false>(p, ld_p, v, v_stride, n_keys, d, all, acc);
  if (d + 8 <= hd) {
    PvBlock<NR, 1, false>(p, ld_p, v, v_stride, n_keys, d, all, acc);
    d += 8;
  }
  if (d < hd) PvBlock<NR, 1, true>(p, ld_p, v, v_stride, n_keys, d, LaneMask(hd - d), acc);
}

}  // namespace

void AttnScores(const float* const* q, int n_rows, const float* k, int64_t k_stride, int n_keys, int head_dim,
                float scale, float* s, int ld_s) {
  for (int j0 = 0; j0 < n_keys; j0 += 4) {
    const int nk = n_keys - j0 < 4 ? n_keys - j0 : 4;
    const float* kr[4];
    for (int j = 0; j < 4; ++j) kr[j] = k + (j0 + (j < nk ? j : 0)) * k_stride;
    int r = 0;
    for (; r + 2 <= n_rows; r += 2)
      ScoresBlock<2>(q + r, kr, nk, head_dim, scale, s + static_cast<int64_t>(r) * ld_s + j0, ld_s);
    if (r < n_rows)
      ScoresBlock<1>(q + r, kr, nk, head_dim, scale, s + static_cast<int64_t>(r) * ld_s + j0, ld_s);
  }
}

void AttnPv(const float* p, int ld_p, int n_rows, const float* v, int64_t v_stride, int n_keys, int head_dim,
            float* const* acc) {
  int r = 0;
  for (; r + 4 <= n_rows; r += 4)
    PvRows<4>(p + static_cast<int64_t>(r) * ld_p, ld_p, v, v_stride, n_keys, head_dim, acc + r);
  const float* pr = p + static_cast<int64_t>(r) * ld_p;
  switch (n_rows - r) {
    case 3:
      PvRows<3>(pr, ld_p, v, v_stride, n_keys, head_dim, acc + r);
      break;
    case 2:
      PvRows<2>(pr, ld_p, v, v_stride, n_keys, head_dim, acc + r);
      break;
    case 1:
      PvRows<1>(pr, ld_p, v, v_stride, n_keys, head_dim, acc + r);
      break;
    default:
      break;
  }
}

}  // namespace ferry::kernels::avx2
