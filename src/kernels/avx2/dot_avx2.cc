// AVX2 dot products of weight rows with partner activation rows. Integer block sums use
// maddubs/madd as ggml does; each block's sum is scaled and FMA'd into float accumulators.
// The reduction order depends only on n, so a row's result never depends on batch or threads.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"
#include "kernels/avx2/dot_chain_256.h"
#include "kernels/avx2/kquant_256.h"
#include "kernels/dispatch.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels::avx2 {
namespace {

// F16C scalar conversion: one instruction instead of the portable bit manipulation.
inline float H(fp16_t h) {
  return _cvtsh_ss(h);
}

inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 LoadBf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// Generic float dot with 4 accumulators; Load converts 8 elements to floats.
template <typename T, typename Load>
inline float DotFloatLike(const T* a, const T* b, int64_t n, Load load, float (*conv)(T)) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(load(a + i), load(b + i), acc0);
    acc1 = _mm256_fmadd_ps(load(a + i + 8), load(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(load(a + i + 16), load(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(load(a + i + 24), load(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load(a + i), load(b + i), acc0);
  acc0 = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  float s = HsumF32x8(acc0);
  for (; i < n; ++i) s += conv(a[i]) * conv(b[i]);
  return s;
}

inline float IdF(float v) {
  return v;
}
inline float F16F(uint16_t v) {
  return Fp16ToFp32(v);
}
inline float Bf16F(uint16_t v) {
  return Bf16ToFp32(v);
}

}  // namespace

float DotF32(const void* w, const void* x, int64_t n) {
  return DotFloatLike(
      static_cast<const float*>(w), static_cast<const float*>(x), n,
      [](const float* p) { return _mm256_loadu_ps(p); }, IdF);
}

float DotF32Plain(const float* a, const float* b, int64_t n) {
  return DotF32(a, b, n);
}

float DotF16(const void* w, const void* x, int64_t n) {
  return DotFloatLike(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), n, LoadF16, F16F);
}

float DotBf16(const void* w, const void* x, int64_t n) {
  return DotFloatLike(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), n, LoadBf16, Bf16F);
}

namespace {

// Sum over 32-element blocks of d_w[i] * d_x[i] * int_dot(block i), with d_x read from the
// float copies after the partner blocks (see internal::ActRowBytes). Four weight scales are
// converted per F16C instruction; blocks alternate between two accumulators.
template <typename WB, typename XB, typename BlockDot>
inline float DotBlocks32(const WB* a, const XB* b, const float* yd, int64_t nb, BlockDot block_dot) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  alignas(16) float dd[4];
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m128i h = _mm_cvtsi32_si128(a[i].d);
    h = _mm_insert_epi16(h, a[i + 1].d, 1);
    h = _mm_insert_epi16(h, a[i + 2].d, 2);
    h = _mm_insert_epi16(h, a[i + 3].d, 3);
    _mm_store_ps(dd, _mm_mul_ps(_mm_cvtph_ps(h), _mm_loadu_ps(yd + i)));
    acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(dd + 0), _mm256_cvtepi32_ps(block_dot(a[i], b[i])), acc0);
    acc1 =
        _mm256_fmadd_ps(_mm256_broadcast_ss(dd + 1), _mm256_cvtepi32_ps(block_dot(a[i + 1], b[i + 1])), acc1);
    acc0 =
        _mm256_fmadd_ps(_mm256_broadcast_ss(dd + 2), _mm256_cvtepi32_ps(block_dot(a[i + 2], b[i + 2])), acc0);
    acc1 =
        _mm256_fmadd_ps(_mm256_broadcast_ss(dd + 3), _mm256_cvtepi32_ps(block_dot(a[i + 3], b[i + 3])), acc1);
  }
  for (; i < nb; ++i)
    acc0 =
        _mm256_fmadd_ps(_mm256_set1_ps(H(a[i].d) * yd[i]), _mm256_cvtepi32_ps(block_dot(a[i], b[i])), acc0);
  return HsumF32x8(_mm256_add_ps(acc0, acc1));
}

// sum_i m_w[i] * s_x[i] for the q4_1/q5_1 offset term (s_x: float copies of d*sum(q)).
template <typename WB>
inline float SumMinTimesS(const WB* a, const float* ys, int64_t nb) {
  __m128 acc = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m128i h = _mm_cvtsi32_si128(a[i].m);
    h = _mm_insert_epi16(h, a[i + 1].m, 1);
    h = _mm_insert_epi16(h, a[i + 2].m, 2);
    h = _mm_insert_epi16(h, a[i + 3].m, 3);
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_cvtph_ps(h), _mm_loadu_ps(ys + i)));
  }
  acc = _mm_add_ps(acc, _mm_movehl_ps(acc, acc));
  acc = _mm_add_ss(acc, _mm_movehdup_ps(acc));
  float s = _mm_cvtss_f32(acc);
  for (; i < nb; ++i) s += H(a[i].m) * ys[i];
  return s;
}

inline __m256i LoadQ(const int8_t* qs) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
}

}  // namespace

namespace {
struct MaddSums {
  static __m256i DotI8(__m256i x, __m256i y) { return MulSumI8(x, y); }
  static __m256i DotU8(__m256i u, __m256i y) { return MulSumU8I8(u, y); }
};
using Chain = ChainDots256<MaddSums>;
}  // namespace

float DotQ4_0(const void* w, const void* x, int64_t n) {
  return Chain::Q4_0(w, x, n);
}

float DotQ4_1(const void* w, const void* x, int64_t n) {
  const int64_t nb = n / 32;
  const auto* a = static_cast<const block_q4_1*>(w);
  const float* yd = internal::ActScales(x, nb, sizeof(block_q8_1));
  const float summs = SumMinTimesS(a, yd + nb, nb);
  const float dot = DotBlocks32(a, static_cast<const block_q8_1*>(x), yd, nb,
                                [&](const block_q4_1& wb, const block_q8_1& xb) {
                                  return MulSumU8I8(NibblesToBytes(wb.qs), LoadQ(xb.qs));
                                });
  return dot + summs;
}

float DotQ5_0(const void* w, const void* x, int64_t n) {
  const int64_t nb = n / 32;
  const __m256i f0 = _mm256_set1_epi8(static_cast<char>(0xF0));
  return DotBlocks32(
      static_cast<const block_q5_0*>(w), static_cast<const block_q8_0*>(x),
      internal::ActScales(x, nb, sizeof(block_q8_0)), nb, [&](const block_q5_0& wb, const block_q8_0& xb) {
        // (q | hbit << 4) - 16 == q | 0xF0 when the high bit is clear, q otherwise.
        const __m256i qx =
            _mm256_or_si256(NibblesToBytes(wb.qs), _mm256_andnot_si256(BitsToBytes(wb.qh), f0));
        return MulSumI8(qx, LoadQ(xb.qs));
      });
}

float DotQ5_1(const void* w, const void* x, int64_t n) {
  const int64_t nb = n / 32;
  const auto* a = static_cast<const block_q5_1*>(w);
  const float* yd = internal::ActScales(x, nb, sizeof(block_q8_1));
  const __m256i b4 = _mm256_set1_epi8(0x10);
  const float summs = SumMinTimesS(a, yd + nb, nb);
  const float dot = DotBlocks32(
      a, static_cast<const block_q8_1*>(x), yd, nb, [&](const block_q5_1& wb, const block_q8_1& xb) {
        const __m256i qx = _mm256_or_si256(NibblesToBytes(wb.qs), _mm256_and_si256(BitsToBytes(wb.qh), b4));
        return MulSumU8I8(qx, LoadQ(xb.qs));
      });
  return dot + summs;
}

float DotQ8_0(const void* w, const void* x, int64_t n) {
  return Chain::Q8_0(w, x, n);
}

void DotRowsQ4_0(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out) {
  Chain::RowsQ4_0(w, row_bytes, x, nr, n, out);
}

void DotRowsQ8_0(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out) {
  Chain::RowsQ8_0(w, row_bytes, x, nr, n, out);
}

float DotMXFP4(const void* w, const void* x, int64_t n) {
  return Chain::MXFP4(w, x, n);
}

void DotRowsMXFP4(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out) {
  Chain::RowsMXFP4(w, row_bytes, x, nr, n, out);
}

namespace {
// The MAC of the shared K-quant bodies: vpmaddwd, then vpaddd.
struct MaddOps {
  static __m256i MaddAcc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
};
using KDots = KQuantDots256<MaddOps>;
}  // namespace

float DotQ4_K(const void* w, const void* x, int64_t n) {
  return KDots::Q4_K(w, x, n);
}
float DotQ5_K(const void* w, const void* x, int64_t n) {
  return KDots::Q5_K(w, x, n);
}
float DotQ6_K(const void* w, const void* x, int64_t n) {
  return KDots::Q6_K(w, x, n);
}
void DotTileQ4_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
  KDots::TileQ4_K(w, x, nt, n, out);
}
void DotTileQ5_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
  KDots::TileQ5_K(w, x, nt, n, out);
}
void DotTileQ6_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
  KDots::TileQ6_K(w, x, nt, n, out);
}

}  // namespace ferry::kernels::avx2
