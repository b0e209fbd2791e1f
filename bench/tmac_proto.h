// Prototype (issue 14 item 3, not in the product): a T-MAC-style table-lookup GEMV for q4_0
// weights, to measure whether looking up activation sums beats Ferry's packed q4_0 tile
// (nibble unpack + VNNI/maddubs) for one-token decode. Results: docs/benchmarks.md
// ("T-MAC-style table lookup for q4_0").
//
// Bit-serial lookup (T-MAC, Wei et al. 2024): with q in [0, 15] and a group of 4 activations,
// sum_k q_k x_k = sum_p 2^p T[idx_p], where idx_p's bit k is bit p of q_k and T[idx] is the sum
// of the activations idx selects (16 entries per group, built once per token). vpshufb looks up
// 64 such indices per instruction (a 16-entry table per 128-bit lane: one group per lane).
// Activations are q8_0-quantized as Ferry's packed path does, so T spans [-508, 508]: exact
// lookups need two byte tables (low byte u8, high byte s8); the products are then exact and
// only the float scaling rounds.
//
// Layout per group of 8 rows and per block b of 32 inputs (144 bytes, one stream, as packed
// q4_0 was before its units held two blocks): d [8] fp16 | w [2][64] u8. In w[h] (h: groups 4h..4h+3 of the
// block), lane l (group g = 4h + l), byte 2r + j (row r, j in {0, 1}): low nibble = idx of plane j, high
// nibble = idx of plane 2 + j, for row r and group g.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/aligned_buffer.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/quant_blocks.h"

namespace ferry::proto {

inline constexpr size_t kTmacUnitBytes = 16 + 2 * 64;

struct TmacQ4 {
  int64_t n_out = 0, n_in = 0;  // n_out % 8 == 0, n_in % 32 == 0
  AlignedBuffer buf;            // [n_out / 8][n_in / 32] units of kTmacUnitBytes
  uint8_t* bytes() { return static_cast<uint8_t*>(buf.data()); }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(buf.data()); }
};

// w: n_out rows of q4_0 blocks (llama.cpp's block_q4_0).
inline TmacQ4 PackTmac(const void* w, int64_t n_out, int64_t n_in) {
  const int64_t nb = n_in / 32;
  TmacQ4 t{n_out, n_in, AlignedBuffer(static_cast<size_t>(n_out / 8 * nb) * kTmacUnitBytes)};
  const auto* blocks = static_cast<const kernels::block_q4_0*>(w);
  for (int64_t rg = 0; rg < n_out / 8; ++rg)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* u = t.bytes() + static_cast<size_t>(rg * nb + b) * kTmacUnitBytes;
      std::memset(u, 0, kTmacUnitBytes);
      for (int r = 0; r < 8; ++r) {
        const kernels::block_q4_0& blk = blocks[(rg * 8 + r) * nb + b];
        std::memcpy(u + 2 * r, &blk.d, 2);
        auto q = [&](int i) { return i < 16 ? blk.qs[i] & 0xF : blk.qs[i - 16] >> 4; };
        for (int g = 0; g < 8; ++g)
          for (int p = 0; p < 4; ++p) {
            int idx = 0;
            for (int k = 0; k < 4; ++k) idx |= ((q(4 * g + k) >> p) & 1) << k;
            uint8_t& byte = u[16 + (g / 4) * 64 + (g % 4) * 16 + 2 * r + (p % 2)];
            byte = static_cast<uint8_t>(byte | (p < 2 ? idx : idx << 4));
          }
      }
    }
  return t;
}

// One token's activations: q8_0 blocks (127 / amax, ties to even, fp16 d), the lookup tables and the
// zero-point correction -8 * sum(x8) per block.
struct TmacAct {
  std::vector<float> dx;         // [nb]
  std::vector<int32_t> sum8;     // [nb] sum of the block's int8 activations
  AlignedBuffer lo_buf, hi_buf;  // [nb][2][64]: lane l of [b][h] = group 4h + l's table bytes
  uint8_t* lo() { return static_cast<uint8_t*>(lo_buf.data()); }
  uint8_t* hi() { return static_cast<uint8_t*>(hi_buf.data()); }
  const uint8_t* lo() const { return static_cast<const uint8_t*>(lo_buf.data()); }
  const uint8_t* hi() const { return static_cast<const uint8_t*>(hi_buf.data()); }
  std::vector<int32_t> corr;  // [nb][16]: -8 * sum8 in lanes 0..7, 0 in 8..15
};

inline void PrepareTmacAct(const float* x, int64_t n_in, TmacAct& a) {
  const int64_t nb = n_in / 32;
  a.dx.resize(static_cast<size_t>(nb));
  a.sum8.resize(static_cast<size_t>(nb));
  a.corr.assign(static_cast<size_t>(nb * 16), 0);
  if (a.lo_buf.size() != static_cast<size_t>(nb * 128)) {
    a.lo_buf = AlignedBuffer(static_cast<size_t>(nb * 128));
    a.hi_buf = AlignedBuffer(static_cast<size_t>(nb * 128));
  }
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    a.dx[static_cast<size_t>(b)] = Fp16ToFp32(Fp32ToFp16(amax / 127.f));  // q8_0 keeps an fp16 d
    int8_t x8[32];
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) {
      x8[i] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
      s += x8[i];
    }
    a.sum8[static_cast<size_t>(b)] = s;
    for (int r = 0; r < 8; ++r) a.corr[static_cast<size_t>(b * 16 + r)] = -8 * s;
    for (int g = 0; g < 8; ++g) {
      int t[16] = {0};  // t[idx] = t[idx without its lowest bit] + that bit's activation
      for (int idx = 1; idx < 16; ++idx)
        t[idx] = t[idx & (idx - 1)] + x8[4 * g + std::countr_zero(unsigned(idx))];
      uint8_t* lo = a.lo() + b * 128 + (g / 4) * 64 + (g % 4) * 16;
      uint8_t* hi = a.hi() + b * 128 + (g / 4) * 64 + (g % 4) * 16;
      for (int idx = 0; idx < 16; ++idx) {
        lo[idx] = static_cast<uint8_t>(t[idx] & 0xFF);
        hi[idx] = static_cast<uint8_t>(static_cast<int8_t>(t[idx] >> 8));  // floor(t / 256)
      }
    }
  }
}

// Scalar twin, the same arithmetic as the AVX-512 kernel: per row two partial sums (groups
// {0, 2, 4, 6} with the zero-point correction, and {1, 3, 5, 7}), each scaled per block by
// fp16(d_w) * dx with one fma, added at the end.
inline void TmacGemvRef(const TmacQ4& w, const TmacAct& a, int64_t rg0, int64_t rg1, float* y) {
  const int64_t nb = w.n_in / 32;
  for (int64_t rg = rg0; rg < rg1; ++rg)
    for (int r = 0; r < 8; ++r) {
      float acc[2] = {0.f, 0.f};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* u = w.bytes() + static_cast<size_t>(rg * nb + b) * kTmacUnitBytes;
        uint16_t d;
        std::memcpy(&d, u + 2 * r, 2);
        int32_t part[2] = {a.corr[static_cast<size_t>(b * 16 + r)], 0};
        for (int g = 0; g < 8; ++g)
          for (int p = 0; p < 4; ++p) {
            const uint8_t byte = u[16 + (g / 4) * 64 + (g % 4) * 16 + 2 * r + (p % 2)];
            const int idx = p < 2 ? byte & 0xF : byte >> 4;
            const size_t at = static_cast<size_t>(b * 128 + (g / 4) * 64 + (g % 4) * 16 + idx);
            const int t = a.lo()[at] + 256 * static_cast<int8_t>(a.hi()[at]);
            part[g % 2] += t * (1 << p);
          }
        const float sc = Fp16ToFp32(d) * a.dx[static_cast<size_t>(b)];
        for (int k = 0; k < 2; ++k) acc[k] = std::fma(static_cast<float>(part[k]), sc, acc[k]);
      }
      y[rg * 8 + r] = acc[0] + acc[1];
    }
}

// Per block and 8 rows: 2 weight loads, 6 nibble ops, 8 vpshufb, 8 vpmaddubsw, 6 adds, the
// int16 -> int32 widening (3), the correction, the scale (4) and one fma; 4 table loads from L1.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))) inline void TmacGemvAvx512(
    const TmacQ4& w, const TmacAct& a, int64_t rg0, int64_t rg1, float* y) {
  const int64_t nb = w.n_in / 32;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i c12 = _mm512_set1_epi16(0x0201);  // bytes (1, 2): planes 0, 1
  const __m512i c48 = _mm512_set1_epi16(0x0804);  // bytes (4, 8): planes 2, 3
  for (int64_t rg = rg0; rg < rg1; ++rg) {
    __m512 acc = _mm512_setzero_ps();  // [2 partials][8 rows]
    const uint8_t* u = w.bytes() + static_cast<size_t>(rg * nb) * kTmacUnitBytes;
    for (int64_t b = 0; b < nb; ++b, u += kTmacUnitBytes) {
      _mm_prefetch(reinterpret_cast<const char*>(u) + 4096, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(u) + 4096 + 64, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(u) + 4096 + 128, _MM_HINT_T0);
      __m512i lo16 = _mm512_setzero_si512(), hi16 = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i wv = _mm512_loadu_si512(u + 16 + 64 * h);
        const __m512i i01 = _mm512_and_si512(wv, m4);
        const __m512i i23 = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
        const __m512i tl = _mm512_loadu_si512(a.lo() + b * 128 + 64 * h);
        const __m512i th = _mm512_loadu_si512(a.hi() + b * 128 + 64 * h);
        lo16 = _mm512_add_epi16(lo16, _mm512_maddubs_epi16(_mm512_shuffle_epi8(tl, i01), c12));
        lo16 = _mm512_add_epi16(lo16, _mm512_maddubs_epi16(_mm512_shuffle_epi8(tl, i23), c48));
        hi16 = _mm512_add_epi16(hi16, _mm512_maddubs_epi16(c12, _mm512_shuffle_epi8(th, i01)));
        hi16 = _mm512_add_epi16(hi16, _mm512_maddubs_epi16(c48, _mm512_shuffle_epi8(th, i23)));
      }
      // [4 lanes][8 rows] int16, each the dot of groups l and 4 + l: |.| <= 15240.
      const __m512i t16 = _mm512_add_epi16(lo16, _mm512_slli_epi16(hi16, 8));
      __m512i s32 = _mm512_add_epi32(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(t16)),
                                     _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(t16, 1)));
      s32 = _mm512_add_epi32(s32, _mm512_loadu_si512(a.corr.data() + b * 16));
      const __m256 s8 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u))),
                                      _mm256_set1_ps(a.dx[static_cast<size_t>(b)]));
      const __m512 sc = _mm512_insertf32x8(_mm512_castps256_ps512(s8), s8, 1);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32), sc, acc);
    }
    _mm256_storeu_ps(y + rg * 8, _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
  }
}

// y[n_out] over the pool's threads (row groups split evenly) from activations already prepared
// (PrepareTmacAct: once per token for every matrix that reads the same x).
inline void TmacGemvPrepared(const TmacQ4& w, const TmacAct& a, float* y, ThreadPool* pool, bool simd) {
  auto run = [&](int64_t g0, int64_t g1) {
    if (simd)
      TmacGemvAvx512(w, a, g0, g1, y);
    else
      TmacGemvRef(w, a, g0, g1, y);
  };
  if (pool)
    pool->ParallelFor(w.n_out / 8, run);
  else
    run(0, w.n_out / 8);
}

inline void TmacGemv(const TmacQ4& w, const float* x, float* y, TmacAct& a, ThreadPool* pool, bool simd) {
  PrepareTmacAct(x, w.n_in, a);
  TmacGemvPrepared(w, a, y, pool, simd);
}

}  // namespace ferry::proto
