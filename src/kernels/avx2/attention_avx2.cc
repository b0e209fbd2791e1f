// AVX2+FMA attention micro-kernels (dispatch.h attn_scores / attn_pv), register-blocked so one
// loaded K or V row feeds several query rows. K and V rows are read in their stored type
// (kernels/kv_row.h) and dequantized in registers, 8 values at a time, into exactly KvValue's
// floats (q8_0/q4_0: int -> float, times the block's scale), shared by every row of the block;
// q8_0 / q4_0 K scores are integer block dots against the query rounded to q8_0 (score_q8_256.h). Every (row,
// key) score and every (row, dim) output runs the same instruction sequence whatever block it falls in:
// blocks only decide which rows share a load, so a row's bits never depend on n_rows (batch invariance).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"
#include "kernels/avx2/pv_int_256.h"
#include "kernels/kv_row.h"
#include "kernels/score_block.h"
#include "kernels/score_q8_256.h"

namespace ferry::kernels::avx2 {
namespace {

// Lanes [0, n) set, n in 0..8.
inline __m256i LaneMask(int n) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}

// The fp16 scale at the start of a q8_0/q4_0 block, as float.
inline float BlockScale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return _cvtsh_ss(h);
}

// Values d..d+7 of a head row of type T (d a multiple of 8, d + 8 <= head_dim).
template <DType T>
inline __m256 Load8(const uint8_t* row, int d) {
  if constexpr (T == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  } else if constexpr (T == DType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  } else if constexpr (T == DType::kBF16) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else if constexpr (T == DType::kQ8_0) {
    const uint8_t* b = row + (d / 32) * sizeof(block_q8_0);
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + d % 32)));
    return _mm256_mul_ps(_mm256_set1_ps(BlockScale(b)), _mm256_cvtepi32_ps(q));
  } else {
    static_assert(T == DType::kQ4_0);
    const uint8_t* b = row + (d / 32) * sizeof(block_q4_0);
    const int j = d % 32;
    __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + (j & 15)));
    if (j >= 16) q = _mm_srli_epi16(q, 4);
    q = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
    return _mm256_mul_ps(_mm256_set1_ps(BlockScale(b)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  }
}

// Values d..d+n-1 (n in 1..7, the ragged end of a head row), zeros above: only f32, f16 and
// bf16 rows can be ragged (q8_0/q4_0 rows are whole blocks of 32).
template <DType T>
inline __m256 LoadTail(const uint8_t* row, int d, int n) {
  if constexpr (T == DType::kF32) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + d, LaneMask(n));
  } else {
    alignas(16) uint16_t h[8] = {};
    std::memcpy(h, row + 2 * d, 2 * static_cast<size_t>(n));
    return Load8<T>(reinterpret_cast<const uint8_t*>(h), 0);
  }
}

// Lane sums of a, b, c, d into lanes 0..3, each by the same tree ((x01 + x23) + (x45 + x67)),
// so a sum does not depend on the vectors beside it.
inline __m128 Hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);      // a01 a23 b01 b23 | a45 a67 b45 b67
  const __m256 cd = _mm256_hadd_ps(c, d);      // c01 c23 d01 d23 | c45 c67 d45 d67
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // a0123 b0123 c0123 d0123 | a4567 b4567 ...
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// The AVX2 side of score_block.h's ScoresBlock (3 rows at most: 16 ymm registers).
struct Ops8 {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  template <DType T>
  static V LoadK(const uint8_t* row, int d, int n) {
    return n >= kLanes ? Load8<T>(row, d) : LoadTail<T>(row, d, n);
  }
  static V LoadQ(const float* q, int d, int n) {
    return n >= kLanes ? _mm256_loadu_ps(q + d) : _mm256_maskload_ps(q + d, LaneMask(n));
  }
  static void Store(V a0, V a1, V a2, V a3, float scale, int nk, float* out) {
    const __m128 sums = _mm_mul_ps(Hsum4(a0, a1, a2, a3), _mm_set1_ps(scale));
    if (nk == 4) {
      _mm_storeu_ps(out, sums);
    } else {
      alignas(16) float tmp[4];
      _mm_store_ps(tmp, sums);
      for (int j = 0; j < nk; ++j) out[j] = tmp[j];
    }
  }
};

// 2 vectors (16 dims) of one row's accumulator.
struct Pair {
  __m256 lo, hi;
};

// NR (1..4) rows x 16 dims of acc from d: acc += p[r][j] * v[j] key by key, in order of j.
template <DType T, int NR>
void PvBlock16(const float* p, int ld_p, const uint8_t* v, int64_t v_stride, int n_keys, int d,
               float* const* acc) {
  // Arrays indexed by the constant-bound row loops below stay in registers once unrolled.
  Pair a[NR];
  for (int r = 0; r < NR; ++r) a[r] = Pair{_mm256_loadu_ps(acc[r] + d), _mm256_loadu_ps(acc[r] + d + 8)};
  const uint8_t* vj = v;
  for (int j = 0; j < n_keys; ++j, vj += v_stride) {
    const __m256 lo = Load8<T>(vj, d), hi = Load8<T>(vj, d + 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 b = _mm256_broadcast_ss(p + r * ld_p + j);
      a[r].lo = _mm256_fmadd_ps(b, lo, a[r].lo);
      a[r].hi = _mm256_fmadd_ps(b, hi, a[r].hi);
    }
  }
  for (int r = 0; r < NR; ++r) {
    _mm256_storeu_ps(acc[r] + d, a[r].lo);
    _mm256_storeu_ps(acc[r] + d + 8, a[r].hi);
  }
}

// One row x the last 1..15 dims from d (ragged head_dim): 8 lanes, then masked lanes; the same
// per-lane FMA sequence as PvBlock16.
template <DType T>
void PvTail(const float* p, const uint8_t* v, int64_t v_stride, int n_keys, int d, int hd, float* acc) {
  for (; d < hd; d += 8) {
    const int n = hd - d < 8 ? hd - d : 8;
    const __m256i m = LaneMask(n);
    __m256 a = _mm256_maskload_ps(acc + d, m);
    const uint8_t* vj = v;
    for (int j = 0; j < n_keys; ++j, vj += v_stride)
      a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), n == 8 ? Load8<T>(vj, d) : LoadTail<T>(vj, d, n), a);
    _mm256_maskstore_ps(acc + d, m, a);
  }
}

template <DType T, int NR>
void PvRows(const float* p, int ld_p, const uint8_t* v, int64_t v_stride, int n_keys, int hd,
            float* const* acc) {
  int d = 0;
  for (; d + 16 <= hd; d += 16) PvBlock16<T, NR>(p, ld_p, v, v_stride, n_keys, d, acc);
  if (d < hd)
    for (int r = 0; r < NR; ++r)
      PvTail<T>(p + static_cast<int64_t>(r) * ld_p, v, v_stride, n_keys, d, hd, acc[r]);
}

template <DType T>
void AttnScores(const void* const* q, int n_rows, const void* k_void, int64_t k_stride, int n_keys,
                int head_dim, float scale, float* s, int ld_s) {
  const uint8_t* k = static_cast<const uint8_t*>(k_void);
  if constexpr (T == DType::kQ8_0 || T == DType::kQ4_0) {
    ScoresQ8ByKeyQuads<T>(q, n_rows, k, k_stride, n_keys, head_dim, scale, s, ld_s);
  } else {
    ScoresByKeyQuads<Ops8, T, 3>(reinterpret_cast<const float* const*>(q), n_rows, k, k_stride, n_keys,
                                 head_dim, scale, s, ld_s);
  }
}

template <DType T>
void AttnPv(const float* p, int ld_p, int n_rows, const void* v_void, int64_t v_stride, int n_keys,
            int head_dim, float* const* acc) {
  const uint8_t* v = static_cast<const uint8_t*>(v_void);
  ForRowBlocks<4>(n_rows, [=](auto nr, int r) {
    PvRows<T, decltype(nr)::value>(p + static_cast<int64_t>(r) * ld_p, ld_p, v, v_stride, n_keys, head_dim,
                                   acc + r);
  });
}

struct MaddOps {  // pv_int_256.h's multiply-add of int16 pairs
  static __m256i Broadcast(int32_t x) { return _mm256_set1_epi32(x); }
  static __m256i MaddAcc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
};

}  // namespace

void FillAttention(internal::KernelTable& t) {
  for (DType type : kKvTypes)
    WithKvType(type, [&](auto tc) {
      t.attn_scores[static_cast<int>(type)] = AttnScores<tc.value>;
      t.attn_pv[static_cast<int>(type)] = AttnPv<tc.value>;
    });
  t.attn_pv_int[static_cast<int>(DType::kQ8_0)] = pv_int::AttnPvInt<pv256::Kernel<MaddOps>, DType::kQ8_0>;
  t.attn_pv_int[static_cast<int>(DType::kQ4_0)] = pv_int::AttnPvInt<pv256::Kernel<MaddOps>, DType::kQ4_0>;
  t.attn_softmax = AttnSoftmax;
}

// Max and sum by 8 lanes, tail lanes masked (-inf for the max, 0 for the sum), then reduced
// across lanes: the order depends on n only. exp is Exp8 for every key, tails included.
float AttnSoftmax(float* s, int n, int n_tile, float* m, float* tile_sum) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = ninf;
  int j = 0;
  for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  if (j < n) {
    const __m256 mask = _mm256_castsi256_ps(LaneMask(n - j));
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(ninf, _mm256_maskload_ps(s + j, LaneMask(n - j)), mask));
  }
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float mx = std::max(*m, _mm_cvtss_f32(m4));
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  if (j < n) {
    const __m256i mask = LaneMask(n - j);
    const __m256 e =
        _mm256_and_ps(Exp8(_mm256_sub_ps(_mm256_maskload_ps(s + j, mask), vm)), _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(s + j, mask, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  for (j = n; j < n_tile; ++j) s[j] = 0.f;
  *tile_sum = HsumF32x8(vsum);
  const float c = mx > *m ? std::exp(*m - mx) : 1.f;
  *m = mx;
  return c;
}

}  // namespace ferry::kernels::avx2
