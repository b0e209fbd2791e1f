// AVX-512 attention micro-kernels (dispatch.h attn_scores / attn_softmax / attn_pv) for every KV
// type: scores with 16 keys in the lanes for heads of up to 64 values, else and for P.V the AVX2
// kernels' scheme on 16 lanes; the online softmax on 16 lanes. K and V rows are read in their
// stored type and dequantized in registers, 16 values at a time, into exactly KvValue's floats
// (q8_0/q4_0: int -> float, times the block's scale), each shared by all rows of a block; q8_0
// and q4_0 K scores are integer block dots against the query rounded to q8_0 (score_q8_256.h).
// Every (row, key) score and every (row, dim) output runs the same instruction sequence
// whatever block it falls in: blocks only decide which rows share a load, so a row's bits
// never depend on n_rows (batch invariance).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/avx512_util.h"
#include "kernels/avx512/pv_int_512.h"
#include "kernels/kv_row.h"
#include "kernels/score_block.h"
#include "kernels/score_q8_256.h"

namespace ferry::kernels::avx512 {
namespace {

inline float BlockScale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return _cvtsh_ss(h);
}

// Values d..d+15 of a head row of type T (d a multiple of 16, d + 16 <= head_dim).
template <DType T>
inline __m512 Load16(const uint8_t* row, int d) {
  if constexpr (T == DType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + d);
  } else if constexpr (T == DType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d)));
  } else if constexpr (T == DType::kBF16) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else if constexpr (T == DType::kQ8_0) {
    const uint8_t* b = row + (d / 32) * sizeof(block_q8_0);
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + d % 32)));
    return _mm512_mul_ps(_mm512_set1_ps(BlockScale(b)), _mm512_cvtepi32_ps(q));
  } else {
    static_assert(T == DType::kQ4_0);
    const uint8_t* b = row + (d / 32) * sizeof(block_q4_0);
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    if (d % 32 != 0) q = _mm_srli_epi16(q, 4);  // elements 16..31: the high nibbles
    q = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
    return _mm512_mul_ps(_mm512_set1_ps(BlockScale(b)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
}

// Values d..d+n-1 (n in 1..15, a ragged row end), zeros above: only f32, f16 and bf16 rows can
// be ragged (q8_0/q4_0 rows are whole blocks of 32).
template <DType T>
inline __m512 LoadTail16(const uint8_t* row, int d, int n) {
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
  if constexpr (T == DType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + d);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, row + 2 * d);
    if constexpr (T == DType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// 16 lanes -> 8 (hi + lo), then lane sums of 4 vectors into lanes 0..3 by a fixed tree.
inline __m256 Fold(__m512 x) {
  return _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_castps512_ps256(_mm512_shuffle_f32x4(x, x, 0xEE)));
}
inline __m128 Hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 ab = _mm256_hadd_ps(Fold(a), Fold(b));
  const __m256 cd = _mm256_hadd_ps(Fold(c), Fold(d));
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// The AVX-512 side of score_block.h's ScoresBlock.
struct Ops16 {
  using V = __m512;
  static void Store(V a0, V a1, V a2, V a3, float scale, int nk, float* out) {
    const __m128 sums = _mm_mul_ps(Hsum4(a0, a1, a2, a3), _mm_set1_ps(scale));
    _mm_mask_storeu_ps(out, static_cast<__mmask8>((1u << nk) - 1), sums);
  }
  static constexpr int kLanes = 16;
  static V LoadQ(const float* q, int d, int n) {
    return _mm512_maskz_loadu_ps(n >= kLanes ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << n) - 1),
                                 q + d);
  }
  template <DType T>
  static V LoadK(const uint8_t* row, int d, int n) {
    return n >= kLanes ? Load16<T>(row, d) : LoadTail16<T>(row, d, n);
  }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};

// r[j] (16 key rows of 16 dims) -> r[c] = dim c of the 16 keys, key j in lane j.
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // lane L: rows 2i, 2i+1 interleaved, elements 4L..4L+1 / 4L+2..4L+3
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + k] lane L: rows 4i..4i+3 of element 4L + k
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {  // element 4L + k: lane g from u[4g + k]'s lane L
    const __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x44),
                 v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xEE);
    r[k] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + k] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + k] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + k] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

// Keys in lanes, for heads of up to 64 values: a group of up to 16 keys is dequantized and
// transposed once into kt [hd][16] (lane j = key j; keys past the group's end are zeros), then
// every row's 16 scores are one FMA chain per lane over d in order: score = fma(q[d], k[d], ...)
// from 0, times scale: the same arithmetic for every (row, key) whatever the rows, keys or lanes
// beside it (batch invariance). With 64 values ScoresBlock spends about as much on its
// horizontal sums (4 FMAs per sum) and on dequantizing each K row once per 4 rows as on FMAs;
// with 128 or more its sums are amortized and the transposition, done for a task's few rows,
// costs more than it saves (kernels_bench and a per-shape harness, docs/benchmarks.md). The
// choice follows head_dim, a model constant, so a row's bits never depend on the batch.
constexpr int kKeysInLanesMaxDim = 64;

template <int NR>
void ScoresRows(const float* const* q, const float* kt, int hd, int nk, float scale, float* s, int ld_s) {
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    const __m512 kv = _mm512_load_ps(kt + 16 * d);
    for (int r = 0; r < NR; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d]), kv, acc[r]);
  }
  StoreScores16<NR>(acc, nk, scale, s, ld_s);
}

template <DType T>
void AttnScores(const void* const* q_form, int n_rows, const void* k_void, int64_t k_stride, int n_keys,
                int head_dim, float scale, float* s, int ld_s) {
  const uint8_t* k = static_cast<const uint8_t*>(k_void);
  if constexpr (T == DType::kQ8_0 || T == DType::kQ4_0)  // integer block dots (avx512vnni: keys in lanes)
    return ScoresQ8ByKeyQuads<T>(q_form, n_rows, k, k_stride, n_keys, head_dim, scale, s, ld_s);
  const auto* const* q = reinterpret_cast<const float* const*>(q_form);  // the f32 rows themselves
  if (head_dim > kKeysInLanesMaxDim)
    return ScoresByKeyQuads<Ops16, T, 4>(q, n_rows, k, k_stride, n_keys, head_dim, scale, s, ld_s);
  alignas(64) float kt[kKeysInLanesMaxDim * 16];  // [head_dim][16 keys]
  for (int j0 = 0; j0 < n_keys; j0 += 16) {
    const int nk = n_keys - j0 < 16 ? n_keys - j0 : 16;
    for (int d0 = 0; d0 < head_dim; d0 += 16) {
      const int n = head_dim - d0;
      __m512 rows[16];
      for (int j = 0; j < 16; ++j) {
        const uint8_t* kj = k + static_cast<int64_t>(j0 + j) * k_stride;
        rows[j] = j >= nk ? _mm512_setzero_ps() : n >= 16 ? Load16<T>(kj, d0) : LoadTail16<T>(kj, d0, n);
      }
      Transpose16x16(rows);
      for (int c = 0; c < 16 && c < n; ++c) _mm512_store_ps(kt + 16 * (d0 + c), rows[c]);
    }
    ForRowBlocks<8>(n_rows, [&](auto nr, int r) {
      ScoresRows<decltype(nr)::value>(q + r, kt, head_dim, nk, scale, s + static_cast<int64_t>(r) * ld_s + j0,
                                      ld_s);
    });
  }
}

// NR (1..4) rows x NV (1..4) vectors of 16 dims from d: acc += p[r][j] * v[j] key by key, in
// order of j (n: the dims left in the row; the last vector is masked when n < 16 * NV).
template <DType T, int NR, int NV>
void PvBlock(const float* p, int ld_p, const uint8_t* v, int64_t v_stride, int n_keys, int d, int n,
             float* const* acc) {
  __mmask16 mask[NV];
  for (int i = 0; i < NV; ++i) {
    const int left = n - 16 * i;
    mask[i] = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
  }
  __m512 a[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < NV; ++i) a[r][i] = _mm512_maskz_loadu_ps(mask[i], acc[r] + d + 16 * i);
  const uint8_t* vj = v;
  for (int j = 0; j < n_keys; ++j, vj += v_stride) {
    __m512 vv[NV];
    for (int i = 0; i < NV; ++i) {
      const int left = n - 16 * i;
      vv[i] = left >= 16 ? Load16<T>(vj, d + 16 * i) : LoadTail16<T>(vj, d + 16 * i, left);
    }
    for (int r = 0; r < NR; ++r) {
      const __m512 b = _mm512_set1_ps(p[r * ld_p + j]);
      for (int i = 0; i < NV; ++i) a[r][i] = _mm512_fmadd_ps(b, vv[i], a[r][i]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < NV; ++i) _mm512_mask_storeu_ps(acc[r] + d + 16 * i, mask[i], a[r][i]);
}

// All dims of NR rows: 64-dim passes, then one pass over what is left.
template <DType T, int NR>
void PvRows(const float* p, int ld_p, const uint8_t* v, int64_t v_stride, int n_keys, int hd,
            float* const* acc) {
  int d = 0;
  for (; d + 64 <= hd; d += 64) PvBlock<T, NR, 4>(p, ld_p, v, v_stride, n_keys, d, 64, acc);
  const int n = hd - d;
  if (n > 32) {
    PvBlock<T, NR, 3>(p, ld_p, v, v_stride, n_keys, d, n, acc);
  } else if (n > 16) {
    PvBlock<T, NR, 2>(p, ld_p, v, v_stride, n_keys, d, n, acc);
  } else if (n > 0) {
    PvBlock<T, NR, 1>(p, ld_p, v, v_stride, n_keys, d, n, acc);
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

// exp(x) on 16 lanes: Cephes' range reduction and degree-5 polynomial as in avx2's Exp8, with
// the power of two applied by scalef (exact, as Exp8's multiply by 2^n is for x <= 0, all the
// softmax asks); x below -87.3 (and -inf) gives exactly 0.
inline __m512 Exp16(__m512 x) {
  constexpr float kPoly[] = {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                             4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f};
  const __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
  __m512 p = _mm512_set1_ps(kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kPoly[i]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(kept, p, n);
}

// One row's online-softmax step (dispatch.h attn_softmax): max and sum by 16 lanes, the ragged
// end masked (-inf for the max, 0 for the sum), then reduced across lanes: the order depends on
// n only. exp is Exp16 for every key, the ragged end included.
float AttnSoftmax(float* s, int n, int n_tile, float* m, float* tile_sum) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int n_full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - n_full)) - 1);
  __m512 vmax = ninf;
  for (int j = 0; j < n_full; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + j));
  vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(ninf, tail, s + n_full));
  const float mx = std::max(*m, _mm512_reduce_max_ps(vmax));
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 vsum = _mm512_setzero_ps();
  for (int j = 0; j < n_full; j += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (tail != 0) {
    const __m512 e =
        _mm512_maskz_mov_ps(tail, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + n_full), vm)));
    _mm512_mask_storeu_ps(s + n_full, tail, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  std::fill(s + n, s + n_tile, 0.f);
  *tile_sum = HsumF32x16(vsum);
  const float c = mx > *m ? std::exp(*m - mx) : 1.f;
  *m = mx;
  return c;
}

struct MaddOps {  // pv_int_512.h's multiply-add of int16 pairs
  static __m512i Broadcast(int32_t x) { return _mm512_set1_epi32(x); }
  static __m512i MaddAcc(__m512i acc, __m512i a, __m512i b) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }
};

}  // namespace

void FillAttention(internal::KernelTable& t) {
  for (DType type : kKvTypes)
    WithKvType(type, [&](auto tc) {
      t.attn_scores[static_cast<int>(type)] = AttnScores<tc.value>;
      t.attn_pv[static_cast<int>(type)] = AttnPv<tc.value>;
    });
  t.attn_pv_int[static_cast<int>(DType::kQ8_0)] = pv_int::AttnPvInt<pv512::Kernel<MaddOps>, DType::kQ8_0>;
  t.attn_pv_int[static_cast<int>(DType::kQ4_0)] = pv_int::AttnPvInt<pv512::Kernel<MaddOps>, DType::kQ4_0>;
  t.attn_softmax = AttnSoftmax;
}

}  // namespace ferry::kernels::avx512
