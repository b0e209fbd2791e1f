// 512-bit packed MatMul micro-kernels (layout: kernels/packed_layout.h), shared by the avx512
// and avx512vnni tables: a template over an Ops struct that forms a block's integer sums
// (maddubs + madd on AVX-512 BW, vpdpbusd on AVX512_VNNI). Only ISA-folder .cc files include
// this, each compiled with its own flags; everything here has internal linkage.
//
// Two 8-row groups per register: the low 256 bits hold a 32-byte load of group g, the high
// 256 bits the same load of group g + 1, so one broadcast of 4 activation bytes feeds 16 rows
// (the 8-row layout is kept; see docs/architecture.md for the 16-row alternative measured).
// Per block and token the float work is one scale product and one FMA per row, in the order
// of ref::PackedTile, so results are bit-identical to it and to the 256-bit tables.
#pragma once

// clang-format off
#include "kernels/x86_intrinsics.h"  // first: before anything that includes immintrin.h
// clang-format on
#include <cstring>
#include <type_traits>

#include "kernels/avx2/packed_tile.h"
#include "kernels/packed_layout.h"
#include "kernels/with_tokens.h"

namespace ferry::kernels::packed512 {
namespace {

using internal::FourBit;
using internal::kPackRows;
using internal::PackedAct;
using internal::PackedShape;

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// 32 bytes at p (group g) in the low half; with kTwo the 32 bytes at p + gs (group g + 1) in
// the high half, else zeros (their lanes' results are dropped).
template <bool kTwo>
inline __m512i Load2(const uint8_t* p, size_t gs) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if (!kTwo) return _mm512_zextsi256_si512(lo);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + gs)), 1);
}

// 8 fp16 scales at p (and 8 at p + gs bytes) -> 16 floats.
template <bool kTwo>
inline __m512 LoadScales16(const uint16_t* p, size_t gs) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (!kTwo) return _mm512_cvtph_ps(_mm256_zextsi128_si256(lo));
  const __m128i hi =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint8_t*>(p) + gs));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// 8 u8 zero points at p (and 8 at p + gs) -> 16 int32 lanes (int16 pairs (z, 0) for madd).
template <bool kTwo>
inline __m512i LoadZ16(const uint8_t* p, size_t gs) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = kTwo ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + gs)) : _mm_setzero_si128();
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(lo, hi));
}

// 8 e8m0 exponents at p (and 8 at p + gs) -> 16 floats 2^(e - 128) (E8M0ToFp32Half: e < 2
// are the denormals 2^-128, 2^-127).
template <bool kTwo>
inline __m512 LoadE8M0Half16(const uint8_t* p, size_t gs) {
  const __m512i e = LoadZ16<kTwo>(p, gs);
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i denormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, denormal));
}

// Software prefetch packed256::kPrefetchAhead bytes ahead of both group streams (g and g + 1, gs
// apart). What it buys depends on how much bandwidth the machine leaves a core: on Zen 5,
// one thread, 48 packed 5632 x 2048 matrices, with and without alternated in one process:
// q4_0 17.5 -> 18.7 GB/s, q8_0 19.3 -> 21.5, q4_K 27.5 -> 29.4, int4 15.6 -> 18.1 (2 threads
// level while the VM gave ~35 GB/s); end to end with ~68 GB/s available, tinyllama decode
// Q4_0 54 -> 62-65 tok/s, Q4_K_M 52-55 -> 67. 2-8 KiB ahead measured alike; 16 KiB lands in
// the other stream. A prefetch past the buffer's end never faults.
// The 256-bit body's prefetch (packed_tile.h), for group g and, with kTwo, group g + 1.
template <bool kTwo>
inline void PrefetchAhead(const uint8_t* p, size_t bytes, size_t gs) {
  packed256::PrefetchAhead(p, bytes);
  if (kTwo) packed256::PrefetchAhead(p + gs, bytes);
}
template <bool kTwo>
inline void PrefetchPart(const uint8_t* p, size_t bytes, int part, size_t gs) {
  packed256::PrefetchPart<8>(p, bytes, part);
  if (kTwo) packed256::PrefetchPart<8>(p + gs, bytes, part);
}

// Keeps GCC from re-associating the unrolled integer chains into a tree that spills.
inline void KeepInRegister(__m512i& v) {
  __asm__("" : "+v"(v));
}

template <bool kTwo>
inline void Store(float* y, __m512 v) {
  if (kTwo) {
    _mm512_storeu_ps(y, v);
  } else {
    _mm256_storeu_ps(y, _mm512_castps512_ps256(v));
  }
}

// 4-bit weights (internal::FourBit). Ops::Acc4 accumulates one token's products of a block
// (u8 weights in [0, 15] x s8 activations), Ops::Sum4 turns them into int32 lanes; MXFP4's
// looked-up values reach 24, past what Acc4's int16 sums hold, so they go through Ops::Acc6.
template <typename Ops, int NT, FourBit kKind, bool kTwo>
void Tile4(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  constexpr bool kInt4 = kKind == FourBit::kInt4, kMx = kKind == FourBit::kMxfp4;
  const int64_t nb = sh.nb();
  const size_t gs = sh.RowGroupBytes();
  const int64_t bpg = kInt4 ? sh.BlocksPerGroup() : 1;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i table =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(internal::kMxfp4Biased)));
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  __m512i zv = _mm512_set1_epi32(kMx ? internal::kMxfp4Bias : 8);  // int16 pairs (z, 0) per row lane
  __m512 dw = _mm512_setzero_ps();
  const auto prefetch = [gs](const uint8_t* q, size_t bytes) { PrefetchAhead<kTwo>(q, bytes, gs); };
  internal::UnitStream<kKind> stream(grp);  // group g's units (group g + 1's are gs bytes on)
  int64_t group_end = 0;                    // first block of the next group
  for (int64_t b = 0; b < nb; ++b) {
    if (!kInt4 || b == group_end) {
      stream.NextGroup(prefetch);
      const uint8_t* sc_at = stream.Scales();
      dw = kMx ? LoadE8M0Half16<kTwo>(sc_at, gs)
               : LoadScales16<kTwo>(reinterpret_cast<const uint16_t*>(sc_at), gs);
      if (kInt4) zv = LoadZ16<kTwo>(stream.Zeros(), gs);
      group_end += bpg;
    }
    const uint8_t* wb = stream.NextQuants(128, prefetch);
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m512i w = Load2<kTwo>(wb + 32 * j, gs);
      __m512i lo = _mm512_and_si512(w, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
      if (kMx) {
        lo = _mm512_shuffle_epi8(table, lo);
        hi = _mm512_shuffle_epi8(table, hi);
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
      const __m512i corr = _mm512_madd_epi16(zv, _mm512_set1_epi32(act[t].s[b] & 0xFFFF));
      const __m512i isum = _mm512_sub_epi32(kMx ? s[t] : Ops::Sum4(s[t]), corr);
      const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(act[t].d[b]));
      acc[t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) Store<kTwo>(y[t], acc[t]);
}

// 8-bit weights (signed, -128 included). Ops::Prep8 turns a weight load into what Ops::Acc8
// multiplies; Ops::kBias8 * s[t,b] is subtracted from the int32 sum.
template <typename Ops, int NT, bool kTwo>
void Tile8(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const int64_t nb = sh.nb();
  const size_t gs = sh.RowGroupBytes();
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const auto prefetch = [gs](const uint8_t* q, size_t bytes) { PrefetchAhead<kTwo>(q, bytes, gs); };
  internal::UnitStream<FourBit::kQ4_0> stream(grp);  // units: d [2][8] fp16 | qs [2][8][32]
  for (int64_t b = 0; b < nb; ++b) {
    stream.NextGroup(prefetch);
    const __m512 dw = LoadScales16<kTwo>(reinterpret_cast<const uint16_t*>(stream.Scales()), gs);
    const uint8_t* wb = stream.NextQuants(256, prefetch);
    __m512i s32[NT];
    for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const auto w = Ops::Prep8(Load2<kTwo>(wb + 32 * s, gs));
      for (int t = 0; t < NT; ++t) {
        s32[t] = Ops::Acc8(s32[t], w, Bcast4(act[t].qs + b * 32 + 4 * s));
        KeepInRegister(s32[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      __m512i isum = s32[t];
      if (Ops::kBias8 != 0) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(Ops::kBias8 * act[t].s[b]));
      const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(act[t].d[b]));
      acc[t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) Store<kTwo>(y[t], acc[t]);
}

// q4_K weights against q8_K activations (layout and arithmetic: packed_layout.h and
// ref::PackedTile): per sub-block the 4-bit block sums of Tile4, scaled by the row's 6-bit scale
// in int32; per super-block two FMAs (d * S, then -dmin * M).
template <typename Ops, int NT, bool kTwo>
void TileK4(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const size_t gs = sh.RowGroupBytes();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < sh.nsb(); ++i) {
    const uint8_t* sb = grp + static_cast<size_t>(i) * internal::kK4PackedSbBytes;
    __m512i S[NT], M[NT];
    for (int t = 0; t < NT; ++t) S[t] = M[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      PrefetchPart<kTwo>(sb, internal::kK4PackedSbBytes, j, gs);
      const uint8_t* wb = sb + j * 128;
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        const __m512i w = Load2<kTwo>(wb + 32 * k, gs);
        const __m512i lo = _mm512_and_si512(w, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = act[t].qs + i * 256 + j * 32;
          s[t] = Ops::Acc4(s[t], lo, Bcast4(xq + 4 * k), hi, Bcast4(xq + 16 + 4 * k));
          KeepInRegister(s[t]);
        }
      }
      const __m512i sc = LoadZ16<kTwo>(sb + internal::kK4ScOffset + j * 8, gs);
      const __m512i mn = LoadZ16<kTwo>(sb + internal::kK4MinOffset + j * 8, gs);
      for (int t = 0; t < NT; ++t) {
        S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(Ops::Sum4(s[t]), sc));
        M[t] = _mm512_add_epi32(M[t], _mm512_mullo_epi32(mn, _mm512_set1_epi32(act[t].s[i * 8 + j])));
      }
    }
    const __m512 dw = LoadScales16<kTwo>(reinterpret_cast<const uint16_t*>(sb + internal::kK4DOffset), gs);
    const __m512 mw =
        LoadScales16<kTwo>(reinterpret_cast<const uint16_t*>(sb + internal::kK4DOffset + 16), gs);
    for (int t = 0; t < NT; ++t) {
      const __m512 dx = _mm512_set1_ps(act[t].d[i]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(S[t]), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(mw, dx), _mm512_cvtepi32_ps(M[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) Store<kTwo>(y[t], acc[t]);
}

// 16 int8 scales: 8 at p (group g) and 8 at p + gs (group g + 1, or zeros) -> int32 lanes.
template <bool kTwo>
inline __m512i LoadSc16(const uint8_t* p, size_t gs) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = kTwo ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + gs)) : _mm_setzero_si128();
  return _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(lo, hi));
}

// Half kHalf (0: lo nibbles, sub-block 2c; 1: hi nibbles, 2c + 1) of load kK of a packed q6_K
// chunk as 6-bit quants 0..63, from its ql load w and qh load h (layout: packed_layout.h).
template <int kK, int kHalf>
inline __m512i Q6Quants(__m512i w, __m512i h) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i low = kHalf ? _mm512_and_si512(_mm512_srli_epi16(w, 4), m4) : _mm512_and_si512(w, m4);
  constexpr int kShift = 4 * (kK % 2) + 2 * kHalf;  // where the field sits; it goes to bits 4-5
  __m512i high = h;
  if constexpr (kShift < 4) high = _mm512_slli_epi16(h, 4 - kShift);
  if constexpr (kShift > 4) high = _mm512_srli_epi16(h, kShift - 4);
  return _mm512_or_si512(low, _mm512_and_si512(high, m30));
}

// q6_K weights against q8_K activations (layout and arithmetic: packed_layout.h and
// ref::PackedTile): per sub-block of 16 the int32 sum of Ops::Acc6 (unsigned quants), less
// 32 * xsum, times the row's int8 scale; per super-block one FMA (d * S).
template <typename Ops, int NT, bool kTwo>
void TileK6(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  const size_t gs = sh.RowGroupBytes();
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < sh.nsb(); ++i) {
    const uint8_t* sb = grp + static_cast<size_t>(i) * internal::kK6PackedSbBytes;
    __m512i S[NT];
    for (int t = 0; t < NT; ++t) S[t] = _mm512_setzero_si512();
    // Sub-block j = 2c + half: the lo (half 0) or hi (half 1) nibbles of chunk c.
    const auto sub_block = [&](const uint8_t* ch, int j, auto half_c) {
      constexpr int half = decltype(half_c)::value;
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
      for (int m = 0; m < 2; ++m) {
        const __m512i h = Load2<kTwo>(ch + internal::kK6QhOffset + 32 * m, gs);
        const __m512i q0 = Q6Quants<0, half>(Load2<kTwo>(ch + 64 * m, gs), h);
        const __m512i q1 = Q6Quants<1, half>(Load2<kTwo>(ch + 64 * m + 32, gs), h);
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = act[t].qs + i * 256 + j * 16 + 8 * m;
          s[t] = Ops::Acc6(s[t], q0, Bcast4(xq), q1, Bcast4(xq + 4));
          KeepInRegister(s[t]);
        }
      }
      const __m512i sc = LoadSc16<kTwo>(sb + internal::kK6ScOffset + j * 8, gs);
      for (int t = 0; t < NT; ++t) {
        const __m512i isum = _mm512_sub_epi32(s[t], _mm512_set1_epi32(32 * act[t].s[i * 16 + j]));
        S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(isum, sc));
      }
    };
    for (int c = 0; c < 8; ++c) {
      PrefetchPart<kTwo>(sb, internal::kK6PackedSbBytes, c, gs);
      const uint8_t* ch = sb + c * internal::kK6ChunkBytes;
      sub_block(ch, 2 * c, std::integral_constant<int, 0>{});
      sub_block(ch, 2 * c + 1, std::integral_constant<int, 1>{});
    }
    const __m512 dw = LoadScales16<kTwo>(reinterpret_cast<const uint16_t*>(sb + internal::kK6DOffset), gs);
    for (int t = 0; t < NT; ++t)
      acc[t] =
          _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(act[t].d[i])), _mm512_cvtepi32_ps(S[t]), acc[t]);
  }
  for (int t = 0; t < NT; ++t) Store<kTwo>(y[t], acc[t]);
}

template <typename Ops, int NT, bool kTwo>
void TileAny(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, float* const* y) {
  if (sh.type == DType::kQ8_0) {
    Tile8<Ops, NT, kTwo>(grp, sh, act, y);
  } else if (sh.is_q4_k()) {
    TileK4<Ops, NT, kTwo>(grp, sh, act, y);
  } else if (sh.is_q6_k()) {
    TileK6<Ops, NT, kTwo>(grp, sh, act, y);
  } else if (sh.is_int4()) {
    Tile4<Ops, NT, FourBit::kInt4, kTwo>(grp, sh, act, y);
  } else if (sh.is_mxfp4()) {
    Tile4<Ops, NT, FourBit::kMxfp4, kTwo>(grp, sh, act, y);
  } else {
    Tile4<Ops, NT, FourBit::kQ4_0, kTwo>(grp, sh, act, y);
  }
}

// The PackedTileFn body: one or two groups per call. Results are the same bits either way
// (every body follows ref::PackedTile's order). A one-token (decode) tile runs the 256-bit
// body: it reads group g, then g + 1, each one sequential stream, where the 512-bit pair reads
// both at once. Decode is memory-bound, and a core streams one sequential array from DRAM far
// faster than two: on AMD Zen 4 (two 8-row groups at once against one after the other, one
// thread) tinyllama-1.1b Q4_0 decode 23.8 against 39.3 tok/s, Q8_0 on the avx512 table (no
// VNNI) 25.1 against 33.2 with two threads; q4_K / q6_K / q8_0 with VNNI / int4_g128 went the
// same way on Zen 5 (docs/benchmarks.md; mxfp4 and int4 with groups of 32 / 64, 512-bit there
// with the old two-plane layout, are not re-measured on Zen 5). Prefill tiles (2-4 tokens) are
// compute-bound and keep the 512-bit pair.
template <typename Ops, typename Ops256>
void PackedTile(const uint8_t* grp, const PackedShape& sh, const PackedAct* act, int nt, int n_grp,
                float* const* y) {
  static_assert(internal::kMaxTileTokens == 4 && internal::kMaxTileGroups == 2, "tile shape");
  if (nt == 1) {
    packed256::PackedTile<Ops256>(grp, sh, act, nt, n_grp, y);
    return;
  }
  WithTokens(nt, [=](auto k) {
    constexpr int NT = decltype(k)::value;
    if (n_grp == 2) {
      TileAny<Ops, NT, true>(grp, sh, act, y);
    } else {
      TileAny<Ops, NT, false>(grp, sh, act, y);
    }
  });
}

}  // namespace
}  // namespace ferry::kernels::packed512
