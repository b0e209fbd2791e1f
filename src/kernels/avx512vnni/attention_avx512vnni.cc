// q8_0 / q4_0 K attention scores by vpdpbusd with 16 keys in the lanes (dispatch.h attn_scores;
// the query in PrepareAttnQuery's q8_0 form). A group of up to 16 keys is transposed once into a
// tile of dwords, [block][dword c][16 keys], of unsigned bytes (vpdpbusd multiplies unsigned by
// signed bytes: q8_0 quants + 128, q4_0 nibbles as they are); every row then runs per block 8
// vpdpbusd with its query's dwords broadcast from memory, then takes off 128 (q4_0: 8) * sum(q)
// so the lane holds the exact int32 dot, and acc = fma(float(isum), dk * dq, acc): dispatch.h's
// q8_0 arithmetic, bit for bit the scalar twin's and the other tables'. Against the float
// keys-in-lanes kernel (dequantize, transpose 16 x 16 floats, one FMA per value per row) a row
// needs a quarter of the instructions per key and the tile a quarter of the shuffles
// (docs/benchmarks.md).
#include <cstdint>

#include "kernels/avx512/avx512_util.h"
#include "kernels/avx512/pv_int_512.h"
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/kv_row.h"
#include "kernels/score_q8_256.h"

namespace ferry::kernels::avx512vnni {
namespace {

constexpr int kMaxTileBlocks = 16;  // heads of up to 512 values in the tile; wider ones: 256-bit path

// The 32 quants of a block as unsigned bytes in element order: q8_0 + 128; q4_0 the nibbles
// (elements 0..15 the low ones, 16..31 the high ones).
template <DType T>
inline __m256i UnsignedQuants(const uint8_t* block) {
  if constexpr (T == DType::kQ8_0) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    static_assert(T == DType::kQ4_0);
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
  }
}
// The offset of UnsignedQuants as a shift (128 = 1 << 7, 8 = 1 << 3): vpdpbusd adds offset x
// sum(q) to the signed dot, which the rows take off after the block.
template <DType T>
constexpr int kQuantOffsetShift = T == DType::kQ8_0 ? 7 : 3;

// Block b of up to 16 keys (k: the first row, rows k_stride bytes apart; keys >= nk read as
// zeros, scale 0): kt[c] lane j = dword c of key j's UnsignedQuants; *dk lane j = key j's scale.
template <DType T>
inline void LoadKeyTile(const uint8_t* k, int64_t k_stride, int nk, int b, __m512i kt[8], __m512* dk) {
  const int64_t off = int64_t{b} * static_cast<int64_t>(kKvBlockBytes<T>);
  auto quants = [&](int j) {
    return j < nk ? UnsignedQuants<T>(k + j * k_stride + off) : _mm256_setzero_si256();
  };
  // r[i]: keys lo(i) and lo(i) + 4 in the low and high halves, lo = 0..3, 8..11; after the two
  // in-lane stages, one cross-lane shuffle per output puts key j in lane j.
  __m512i r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) {
    const int lo = i < 4 ? i : i + 4;
    r[i] = _mm512_inserti64x4(_mm512_castsi256_si512(quants(lo)), quants(lo + 4), 1);
  }
  for (int m = 0; m < 4; ++m) {  // 128-bit lane L: rows 2m, 2m+1 interleaved, elements 0,1 / 2,3
    t[2 * m] = _mm512_unpacklo_epi32(r[2 * m], r[2 * m + 1]);
    t[2 * m + 1] = _mm512_unpackhi_epi32(r[2 * m], r[2 * m + 1]);
  }
  for (int g = 0; g < 2; ++g) {  // u[4g + e] lane L: element e of rows 4g..4g+3
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    kt[e] = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);
    kt[4 + e] = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
  }
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(k_stride)));
  const __mmask16 live = static_cast<__mmask16>((1u << nk) - 1);
  const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, k + off, 1);
  *dk = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));  // the low 16 bits: the fp16 scale
}

// acc += k (unsigned bytes) x the signed-byte dword at q, broadcast to every lane. In asm: GCC
// does not fold the broadcast into vpdpbusd's memory operand, and a vpbroadcastd per vpdpbusd
// doubles the scores' instructions.
inline __m512i DpbusdBroadcast(__m512i acc, __m512i k, const uint8_t* q) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(k), "m"(*reinterpret_cast<const int32_t*>(q)));
  return acc;
}

// NR (1..8) rows against a tile of nb blocks: s[r][j] for the nk keys.
template <DType T, int NR>
void ScoresQ8Rows(const void* const* q, const __m512i* kt, const __m512* dk, int nb, int nk, float scale,
                  float* s, int ld_s) {
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const int64_t off = int64_t{b} * sizeof(block_q8_0) + 2;
    __m512i isum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) {
      const __m512i kc = _mm512_load_si512(kt + 8 * b + c);
      for (int r = 0; r < NR; ++r)
        isum[r] = DpbusdBroadcast(isum[r], kc, static_cast<const uint8_t*>(q[r]) + off + 4 * c);
    }
    for (int r = 0; r < NR; ++r) {
      const __m512i offset =
          _mm512_slli_epi32(_mm512_set1_epi32(internal::ActSumsQ8_0(q[r], nb)[b]), kQuantOffsetShift<T>);
      isum[r] = _mm512_sub_epi32(isum[r], offset);
      const float dq = internal::ActScales(q[r], nb, sizeof(block_q8_0))[b];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(dk[b], _mm512_set1_ps(dq)), acc[r]);
    }
  }
  avx512::StoreScores16<NR>(acc, nk, scale, s, ld_s);
}

template <DType T>
void AttnScoresInt(const void* const* q, int n_rows, const void* k_void, int64_t k_stride, int n_keys,
                   int head_dim, float scale, float* s, int ld_s) {
  const uint8_t* k = static_cast<const uint8_t*>(k_void);
  const int nb = head_dim / 32;
  if (nb > kMaxTileBlocks)
    return ScoresQ8ByKeyQuads<T>(q, n_rows, k, k_stride, n_keys, head_dim, scale, s, ld_s);
  alignas(64) __m512i kt[kMaxTileBlocks * 8];  // [nb][8 dwords][16 keys]
  alignas(64) __m512 dk[kMaxTileBlocks];       // [nb][16 keys]
  for (int j0 = 0; j0 < n_keys; j0 += 16) {
    const int nk = n_keys - j0 < 16 ? n_keys - j0 : 16;
    for (int b = 0; b < nb; ++b) LoadKeyTile<T>(k + j0 * k_stride, k_stride, nk, b, kt + 8 * b, dk + b);
    ForRowBlocks<8>(n_rows, [&](auto nr, int r) {
      ScoresQ8Rows<T, decltype(nr)::value>(q + r, kt, dk, nb, nk, scale,
                                           s + static_cast<int64_t>(r) * ld_s + j0, ld_s);
    });
  }
}

struct VnniOps {  // pv_int_512.h's multiply-add of int16 pairs
  // In asm: with the intrinsic GCC 12 copies each of the 16 accumulators to another register
  // and back around every vpdpwssd (about 35 extra moves and 2 spills per key pair).
  static __m512i Broadcast(int32_t x) { return _mm512_set1_epi32(x); }
  static __m512i MaddAcc(__m512i acc, __m512i a, __m512i b) {
    asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
  }
};

}  // namespace

void FillAttention(internal::KernelTable& t) {
  t.attn_scores[static_cast<int>(DType::kQ8_0)] = AttnScoresInt<DType::kQ8_0>;
  t.attn_scores[static_cast<int>(DType::kQ4_0)] = AttnScoresInt<DType::kQ4_0>;
  t.attn_pv_int[static_cast<int>(DType::kQ8_0)] = pv_int::AttnPvInt<pv512::Kernel<VnniOps>, DType::kQ8_0>;
  t.attn_pv_int[static_cast<int>(DType::kQ4_0)] = pv_int::AttnPvInt<pv512::Kernel<VnniOps>, DType::kQ4_0>;
}

}  // namespace ferry::kernels::avx512vnni
