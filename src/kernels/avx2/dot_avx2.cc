// AVX2 dot products of weight rows with partner activation rows. Integer block sums use
// maddubs/madd as ggml does; each block's sum is scaled and FMA'd into float accumulators.
// The reduction order depends only on n, so a row's result never depends on batch or threads.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "kernels/avx2/avx2.h"
#include "kernels/avx2/avx2_util.h"
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

float DotQ4_0(const void* w, const void* x, int64_t n) {
  const int64_t nb = n / 32;
  const __m256i off = _mm256_set1_epi8(8);
  return DotBlocks32(static_cast<const block_q4_0*>(w), static_cast<const block_q8_0*>(x),
                     internal::ActScales(x, nb, sizeof(block_q8_0)), nb,
                     [&](const block_q4_0& wb, const block_q8_0& xb) {
                       return MulSumI8(_mm256_sub_epi8(NibblesToBytes(wb.qs), off), LoadQ(xb.qs));
                     });
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
  const int64_t nb = n / 32;
  return DotBlocks32(
      static_cast<const block_q8_0*>(w), static_cast<const block_q8_0*>(x),
      internal::ActScales(x, nb, sizeof(block_q8_0)), nb,
      [&](const block_q8_0& wb, const block_q8_0& xb) { return MulSumI8(LoadQ(wb.qs), LoadQ(xb.qs)); });
}

namespace {

// Shuffle masks selecting scale pair k (int16 lanes) of a q4_K/q5_K block: 2*k and 2*k+1 as a
// broadcast of bytes (2k, 2k+1) across the register.
inline __m256i ScaleShuffleK4(int k) {
  const char lo = static_cast<char>(2 * k), hi = static_cast<char>(2 * k + 1);
  return _mm256_set_epi8(hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi,
                         lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo);
}

// Unpacks q4_K/q5_K's 12 scale bytes into utmp[0..1] = 8 scales, utmp[2..3] = 8 mins.
inline void UnpackK4Scales(const uint8_t* scales, uint32_t utmp[4]) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  std::memcpy(utmp, scales, 12);
  utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
  const uint32_t uaux = utmp[1] & kmask1;
  utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
  utmp[2] = uaux;
  utmp[0] &= kmask1;
}

// Mins contribution: returns int32 lanes min[j] * (bsum[2j] + bsum[2j+1]) (4 lanes of pairs).
inline __m128i MinsTimesBsums(__m256i mins_and_scales, const int16_t* bsums) {
  const __m256i q8sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
  const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
  return _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
}

// q4_K / q5_K against NT q8_K rows: the weight side of a block (scale unpacking, nibble masks,
// q5_K's fifth bit) is done once for all NT tokens. Each token runs exactly the instruction
// sequence of NT = 1, so DotQ4_K (NT = 1) and DotTileQ4_K give the same bits for a token
// whatever its tile.
template <int NT, typename Block>
void DotK4Rows(const void* w, const void* const* x, int64_t n, float* out) {
  constexpr bool kQ5 = std::is_same_v<Block, block_q5_K>;  // q5_K: a fifth bit from qh
  const auto* a = static_cast<const Block*>(w);
  const block_q8_K* b[NT];
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const block_q8_K*>(x[t]);
  const __m256i m4 = _mm256_set1_epi8(0xF);
  __m256 acc[NT];
  __m128 acc_m[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    acc_m[t] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float wd = H(a[i].d), wdmin = H(a[i].dmin);
    uint32_t utmp[4];
    UnpackK4Scales(a[i].scales, utmp);
    const __m256i mins_and_scales =
        _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(utmp[3]), static_cast<int>(utmp[2]),
                                           static_cast<int>(utmp[1]), static_cast<int>(utmp[0])));
    float d[NT];
    for (int t = 0; t < NT; ++t) {
      d[t] = b[t][i].d * wd;
      const float dmin = -b[t][i].d * wdmin;
      acc_m[t] = _mm_fmadd_ps(_mm_set1_ps(dmin),
                              _mm_cvtepi32_ps(MinsTimesBsums(mins_and_scales, b[t][i].bsums)), acc_m[t]);
    }
    const __m128i sc128 = _mm256_castsi256_si128(mins_and_scales);
    const __m256i scales = _mm256_inserti128_si256(_mm256_castsi128_si256(sc128), sc128, 1);
    const uint8_t* q4 = a[i].qs;
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kQ5) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qh));
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i scale_l = _mm256_shuffle_epi8(scales, ScaleShuffleK4(2 * j));
      const __m256i scale_h = _mm256_shuffle_epi8(scales, ScaleShuffleK4(2 * j + 1));
      const __m256i q4bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 32 * j));
      __m256i q4l = _mm256_and_si256(q4bits, m4);
      __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
      if constexpr (kQ5) {  // bit 2j of qh goes with the low nibbles, bit 2j + 1 with the high
        const auto high = [&](int bit) {
          const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << bit));
          return _mm256_slli_epi16(_mm256_srli_epi16(_mm256_and_si256(hbits, mask), bit), 4);
        };
        q4l = _mm256_add_epi8(q4l, high(2 * j));
        q4h = _mm256_add_epi8(q4h, high(2 * j + 1));
      }
      for (int t = 0; t < NT; ++t) {
        const int8_t* q8 = b[t][i].qs + 64 * j;
        const __m256i q8l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
        const __m256i q8h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32));
        const __m256i pl = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
        const __m256i ph = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(pl, ph));
        if constexpr (NT > 1) KeepInRegister(sumi[t]);  // NT = 1 fits without it
      }
    }
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d[t]), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
  }
  for (int t = 0; t < NT; ++t) {
    __m128 m = _mm_add_ps(acc_m[t], _mm_movehl_ps(acc_m[t], acc_m[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    out[t] = HsumF32x8(acc[t]) + _mm_cvtss_f32(m);
  }
}
}  // namespace

namespace {

// q6_K against NT q8_K rows, the weight side (bit planes, scales) once for all of them; the
// same per-token sequence as NT = 1 (see DotK4Rows).
template <int NT>
void DotQ6_KRows(const void* w, const void* const* x, int64_t n, float* out) {
  const auto* a = static_cast<const block_q6_K*>(w);
  const block_q8_K* bk[NT];
  for (int t = 0; t < NT; ++t) bk[t] = static_cast<const block_q8_K*>(x[t]);
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m256i m32s = _mm256_set1_epi8(32);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float wd = H(a[i].d);
    const uint8_t* q4 = a[i].ql;
    const uint8_t* qh = a[i].qh;
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * j));
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4);
      const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4);
      const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4);
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 64 * j));
      const __m256i b2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 64 * j + 32));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(b1, m4), h0),
          _mm256_or_si256(_mm256_and_si256(b2, m4), h1),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), h2),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), h3),
      };
      for (int k = 0; k < 4; ++k) {
        // Scales of groups 8j+2k and 8j+2k+1, each broadcast over 8 int16 lanes.
        const int g = 8 * j + 2 * k;
        const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(a[i].scales[g])),
                                             _mm_set1_epi16(static_cast<int16_t>(a[i].scales[g + 1])));
        for (int t = 0; t < NT; ++t) {
          const __m256i q8v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bk[t][i].qs + 128 * j + 32 * k));
          const __m256i p16 =
              _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], q8v), _mm256_maddubs_epi16(m32s, q8v));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sc, p16));
          if constexpr (NT > 1) KeepInRegister(sumi[t]);  // NT = 1 fits without it
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      const float d = bk[t][i].d * wd;
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HsumF32x8(acc[t]);
}

}  // namespace

float DotQ4_K(const void* w, const void* x, int64_t n) {
  float out;
  DotK4Rows<1, block_q4_K>(w, &x, n, &out);
  return out;
}

float DotQ5_K(const void* w, const void* x, int64_t n) {
  float out;
  DotK4Rows<1, block_q5_K>(w, &x, n, &out);
  return out;
}

float DotQ6_K(const void* w, const void* x, int64_t n) {
  float out;
  DotQ6_KRows<1>(w, &x, n, &out);
  return out;
}

void DotTileQ4_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
  static_assert(internal::kMaxDotTile == 4, "WithTokens instantiates 1..4 tokens");
  WithTokens(nt, [=](auto k) { DotK4Rows<decltype(k)::value, block_q4_K>(w, x, n, out); });
}

void DotTileQ5_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
  WithTokens(nt, [=](auto k) { DotK4Rows<decltype(k)::value, block_q5_K>(w, x, n, out); });
}

void DotTileQ6_K(const void* w, const void* const* x, int nt, int64_t n, float* out) {
  WithTokens(nt, [=](auto k) { DotQ6_KRows<decltype(k)::value>(w, x, n, out); });
}

}  // namespace ferry::kernels::avx2
