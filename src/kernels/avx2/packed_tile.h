// 256-bit packed MatMul micro-kernels (layout: kernels/packed_layout.h), shared by the avx2 and
// avx2vnni tables: the kernel body is a template over an Ops struct that forms a block's integer
// sums (maddubs + madd on AVX2, vpdpbusd on AVX-VNNI). Only ISA-folder .cc files include this,
// each compiled with its own flags; everything here has internal linkage (anonymous namespace),
// so the two instantiations never meet at link time.
//
// 8 rows per register: a 32-bit lane holds 4 quants of one row, the activation's 4 matching
// bytes are broadcast. The weights of a block are unpacked once and used for NT tokens. Float
// work per block and token: one scale product and one FMA, in the order of ref::PackedTile, so
// results are bit-identical to it whatever the Ops.
#pragma once

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/avx2/avx2_util.h"
#include "kernels/packed_layout.h"
#include "kernels/with_tokens.h"

namespace ferry::kernels::packed256 {
namespace {

using internal::FourBit;
using internal::kPackRows;
using internal::PackedAct;
using internal::PackedShape;

inline __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256 LoadScales8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

using avx2::KeepInRegister;

// Software prefetch kPrefetchAhead bytes ahead of the weight stream (see packed_tile512.h).
inline constexpr size_t kPrefetchAhead = 4096;

// Prefetches the cache lines of [p, p + bytes) + kPrefetchAhead.
inline void PrefetchAhead(const uint8_t* p, size_t bytes) {
  const char* a = reinterpret_cast<const char*>(p) + kPrefetchAhead;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(a + o, _MM_HINT_T0);
}

// PrefetchAhead over part `part` of [p, p + bytes) cut in kParts: a k-quant super-block's
// prefetches spread over its 8 sub-blocks / chunks, as fast as the stream is read. One burst
// of 19-27 lines per super-block held q6_K to 13-19 GB/s from DRAM on one Zen 4 core, spread
// 21-25 (q4_K 16-25 -> 23-27; a harness over 600 MB of super-blocks, 1 thread).
template <int kParts>
inline void PrefetchPart(const uint8_t* p, size_t bytes, int part) {
  const size_t b0 = bytes * part / kParts, b1 = bytes * (part + 1) / kParts;
  PrefetchAhead(p + b0, b1 - b0);
}

// 4-bit weights (internal::FourBit). Ops::Acc4 accumulates one token's products of a block
// (u8 weights in [0, 15] x s8 activations), Ops::Sum4 turns them into int32 lanes; MXFP4's
// looked-up values reach 24, past what Acc4's int16 sums hold, so they go through Ops::Acc6.
template <typename Ops, int NT, FourBit kKind>
void Tile4(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  constexpr bool kInt4 = kKind == FourBit::kInt4, kMx = kKind == FourBit::kMxfp4;
  const int64_t nb = sh.nb();
  const int64_t bpg = kInt4 ? sh.BlocksPerGroup() : 1;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(internal::kMxfp4Biased)));
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  __m256i zv = _mm256_set1_epi32(kMx ? internal::kMxfp4Bias : 8);  // int16 pairs (z, 0) per row lane
  __m256 dw = _mm256_setzero_ps();
  internal::UnitStream<kKind> stream(grp);  // the row group's units: a header, then its blocks' quants
  int64_t group_end = 0;  // first block of the next group (a counter, not b % bpg per block)
  for (int64_t b = 0; b < nb; ++b) {
    if (!kInt4 || b == group_end) {
      stream.NextGroup(PrefetchAhead);
      const uint8_t* sc_at = stream.Scales();
      dw = kMx ? avx2::E8M0HalfLanes(
                     _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc_at))))
               : LoadScales8(reinterpret_cast<const uint16_t*>(sc_at));
      if (kInt4) zv = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(stream.Zeros())));
      group_end += bpg;
    }
    const uint8_t* wb = stream.NextQuants(128, PrefetchAhead);
    __m256i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 * j));
      __m256i lo = _mm256_and_si256(w, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
      if (kMx) {
        lo = _mm256_shuffle_epi8(table, lo);
        hi = _mm256_shuffle_epi8(table, hi);
      }
      for (int t = 0; t < NT; ++t) {
        const int8_t* xq = act[t].qs + b * 32;
        if (kMx) {
          s[t] = Ops::Acc6(s[t], lo, Bcast4(xq + 4 * j), hi, Bcast4(xq + 16 + 4 * j));
        } else {
          s[t] = Ops::Acc4(s[t], lo, Bcast4(xq + 4 * j), hi, Bcast4(xq + 16 + 4 * j));
        }
        KeepInRegister(s[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      // z * s exact in int32 (|s| <= 32 * 127 fits the int16 half madd reads).
      const __m256i corr = _mm256_madd_epi16(zv, _mm256_set1_epi32(act[t].s[b] & 0xFFFF));
      const __m256i isum = _mm256_sub_epi32(kMx ? s[t] : Ops::Sum4(s[t]), corr);
      const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[b]));
      acc[t] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y[t], acc[t]);
}

// 8-bit weights (signed, -128 included). Ops::Prep8 turns a weight load into what Ops::Acc8
// multiplies; Ops::kBias8 * s[t,b] is subtracted from the int32 sum (VNNI offsets the weights
// to unsigned by +128).
template <typename Ops, int NT>
void Tile8(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const int64_t nb = sh.nb();
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  internal::UnitStream<FourBit::kQ4_0> stream(grp);  // units: d [2][8] fp16 | qs [2][8][32]
  for (int64_t b = 0; b < nb; ++b) {
    stream.NextGroup(PrefetchAhead);
    const __m256 dw = LoadScales8(reinterpret_cast<const uint16_t*>(stream.Scales()));
    const uint8_t* wb = stream.NextQuants(256, PrefetchAhead);
    __m256i s32[NT];
    for (int t = 0; t < NT; ++t) s32[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const auto w = Ops::Prep8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 * s)));
      for (int t = 0; t < NT; ++t) {
        s32[t] = Ops::Acc8(s32[t], w, Bcast4(act[t].qs + b * 32 + 4 * s));
        KeepInRegister(s32[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      __m256i isum = s32[t];
      if (Ops::kBias8 != 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(Ops::kBias8 * act[t].s[b]));
      const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[b]));
      acc[t] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y[t], acc[t]);
}

// q4_K weights against q8_K activations (layout and arithmetic: packed_layout.h and
// ref::PackedTile): per sub-block the 4-bit block sums of Tile4, scaled by the row's 6-bit scale
// in int32; per super-block two FMAs (d * S, then -dmin * M).
template <typename Ops, int NT>
void TileK4(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < sh.nsb(); ++i) {
    const uint8_t* sb = grp + static_cast<size_t>(i) * internal::kK4PackedSbBytes;
    __m256i S[NT], M[NT];
    for (int t = 0; t < NT; ++t) S[t] = M[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      PrefetchPart<8>(sb, internal::kK4PackedSbBytes, j);
      const uint8_t* wb = sb + j * 128;
      __m256i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 * k));
        const __m256i lo = _mm256_and_si256(w, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = act[t].qs + i * 256 + j * 32;
          s[t] = Ops::Acc4(s[t], lo, Bcast4(xq + 4 * k), hi, Bcast4(xq + 16 + 4 * k));
          KeepInRegister(s[t]);
        }
      }
      const __m256i sc = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + internal::kK4ScOffset + j * 8)));
      const __m256i mn = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + internal::kK4MinOffset + j * 8)));
      for (int t = 0; t < NT; ++t) {
        S[t] = _mm256_add_epi32(S[t], _mm256_mullo_epi32(Ops::Sum4(s[t]), sc));
        M[t] = _mm256_add_epi32(M[t], _mm256_mullo_epi32(mn, _mm256_set1_epi32(act[t].s[i * 8 + j])));
      }
    }
    const __m256 dw = LoadScales8(reinterpret_cast<const uint16_t*>(sb + internal::kK4DOffset));
    const __m256 mw = LoadScales8(reinterpret_cast<const uint16_t*>(sb + internal::kK4DOffset + 16));
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(act[t].d[i]);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(S[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(mw, dx), _mm256_cvtepi32_ps(M[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y[t], acc[t]);
}

// Half kHalf (0: lo nibbles, sub-block 2c; 1: hi nibbles, 2c + 1) of load kK of a packed q6_K
// chunk as 6-bit quants 0..63, from its ql load w and qh load h (layout: packed_layout.h).
template <int kK, int kHalf>
inline __m256i Q6Quants(__m256i w, __m256i h) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i low = kHalf ? _mm256_and_si256(_mm256_srli_epi16(w, 4), m4) : _mm256_and_si256(w, m4);
  constexpr int kShift = 4 * (kK % 2) + 2 * kHalf;  // where the field sits; it goes to bits 4-5
  __m256i high = h;
  if constexpr (kShift < 4) high = _mm256_slli_epi16(h, 4 - kShift);
  if constexpr (kShift > 4) high = _mm256_srli_epi16(h, kShift - 4);
  return _mm256_or_si256(low, _mm256_and_si256(high, m30));
}

// q6_K weights against q8_K activations (layout and arithmetic: packed_layout.h and
// ref::PackedTile): per sub-block of 16 the int32 sum of Ops::Acc6 (unsigned quants), less
// 32 * xsum, times the row's int8 scale; per super-block one FMA (d * S). Each half of a chunk
// loads the chunk's 6 registers again (from L1) so that NT = 4 keeps its sums in registers.
template <typename Ops, int NT>
void TileK6(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < sh.nsb(); ++i) {
    const uint8_t* sb = grp + static_cast<size_t>(i) * internal::kK6PackedSbBytes;
    __m256i S[NT];
    for (int t = 0; t < NT; ++t) S[t] = _mm256_setzero_si256();
    // Sub-block j = 2c + half: the lo (half 0) or hi (half 1) nibbles of chunk c.
    const auto sub_block = [&](const uint8_t* ch, int j, auto half_c) {
      constexpr int half = decltype(half_c)::value;
      __m256i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
      for (int m = 0; m < 2; ++m) {
        const __m256i h =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ch + internal::kK6QhOffset + 32 * m));
        const __m256i q0 =
            Q6Quants<0, half>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ch + 64 * m)), h);
        const __m256i q1 =
            Q6Quants<1, half>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ch + 64 * m + 32)), h);
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = act[t].qs + i * 256 + j * 16 + 8 * m;
          s[t] = Ops::Acc6(s[t], q0, Bcast4(xq), q1, Bcast4(xq + 4));
          KeepInRegister(s[t]);
        }
      }
      const __m256i sc = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + internal::kK6ScOffset + j * 8)));
      for (int t = 0; t < NT; ++t) {
        const __m256i isum = _mm256_sub_epi32(s[t], _mm256_set1_epi32(32 * act[t].s[i * 16 + j]));
        S[t] = _mm256_add_epi32(S[t], _mm256_mullo_epi32(isum, sc));
      }
    };
    for (int c = 0; c < 8; ++c) {
      PrefetchPart<8>(sb, internal::kK6PackedSbBytes, c);
      const uint8_t* ch = sb + c * internal::kK6ChunkBytes;
      sub_block(ch, 2 * c, std::integral_constant<int, 0>{});
      sub_block(ch, 2 * c + 1, std::integral_constant<int, 1>{});
    }
    const __m256 dw = LoadScales8(reinterpret_cast<const uint16_t*>(sb + internal::kK6DOffset));
    for (int t = 0; t < NT; ++t)
      acc[t] =
          _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[i])), _mm256_cvtepi32_ps(S[t]), acc[t]);
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y[t], acc[t]);
}

// The PackedTileFn body: groups one at a time (8 rows fill a 256-bit register).
template <typename Ops>
void PackedTile(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, int nt, int n_grp,
                float* const* y) {
  static_assert(internal::kMaxTileTokens == 4, "WithTokens instantiates 1..4 tokens");
  for (int gi = 0; gi < n_grp; ++gi) {
    const uint8_t* g = grp + static_cast<size_t>(gi) * sh.RowGroupBytes();
    float* yg[internal::kMaxTileTokens] = {};
    for (int t = 0; t < nt; ++t) yg[t] = y[t] + gi * kPackRows;
    WithTokens(nt, [=](auto k) {
      constexpr int NT = decltype(k)::value;
      if (sh.type == DType::kQ8_0) {
        Tile8<Ops, NT>(g, sh, act, yg);
      } else if (sh.is_q4_k()) {
        TileK4<Ops, NT>(g, sh, act, yg);
      } else if (sh.is_q6_k()) {
        TileK6<Ops, NT>(g, sh, act, yg);
      } else if (sh.is_int4()) {
        Tile4<Ops, NT, FourBit::kInt4>(g, sh, act, yg);
      } else if (sh.is_mxfp4()) {
        Tile4<Ops, NT, FourBit::kMxfp4>(g, sh, act, yg);
      } else {
        Tile4<Ops, NT, FourBit::kQ4_0>(g, sh, act, yg);
      }
    });
  }
}

}  // namespace
}  // namespace ferry::kernels::packed256
