// Internal dispatch table: one row of function pointers per ISA, chosen once from cpuid
// (FERRY_ISA may force one). Public entry points in kernels.h forward through Table().
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "kernels/packed_layout.h"

namespace ferry::kernels::internal {

// Weight row x activation row (already converted to the partner type) -> float.
using DotFn = float (*)(const void* w, const void* x, int64_t n);
// One weight row x nt (1..kMaxDotTile) activation rows -> out[nt]. Token t's result is
// bit-identical to the same table's dot(w, x[t], n): MatMul's results never depend on how
// it tiles the tokens.
using DotTileFn = void (*)(const void* w, const void* const* x, int nt, int64_t n, float* out);
inline constexpr int kMaxDotTile = 8;  // tables with fewer registers run a tile in slices
// nr (1..kMaxDotRows) weight rows at w + r * row_bytes x one activation row -> out[nr]. Row r's
// result is bit-identical to the same table's dot(w + r * row_bytes, x, n); for dots whose
// float chain is serial (q4_0 / q8_0 in the packed order), several rows let the chains overlap.
using DotRowsFn = void (*)(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out);
inline constexpr int kMaxDotRows = 8;
// f32 activation row [n] -> partner-type row.
using QuantizeFn = void (*)(const float* x, void* dst, int64_t n);

inline constexpr int kMaxDType = 40;  // ggml DType values are < 40 (mxfp4 = 39)

// q: [n_rows] query rows in the K type's query form (AttnQueryBytes / PrepareAttnQuery).
using AttnScoresFn = void (*)(const void* const* q, int n_rows, const void* k, int64_t k_stride, int n_keys,
                              int head_dim, float scale, float* s, int ld_s);
using AttnPvFn = void (*)(const float* p, int ld_p, int n_rows, const void* v, int64_t v_stride, int n_keys,
                          int head_dim, float* const* acc);
// v: [n_keys] pointers to V head rows (a key tile gathered across KV blocks).
using AttnPvIntFn = void (*)(const float* p, int ld_p, int n_rows, const uint8_t* const* v, int n_keys,
                             int head_dim, float* const* acc);
inline constexpr int kAttnPvIntMaxKeys = 64;        // keys per attn_pv_int call (attention's key tile)
inline constexpr float kAttnPvIntLevels = 32767.f;  // the int16 weights' largest magnitude
// A (row, block) whose weights are all below this adds nothing: each output moves by at most
// 64 * 128 * 2^-100 < 1e-26 (p <= 1, and the softmax sum it is divided by is >= 1), and
// 32767 / m stays finite.
inline constexpr float kAttnPvIntMinWeight = 0x1p-100f;

struct KernelTable {
  Isa isa;
  DotFn dot[kMaxDType];                // indexed by weight DType; null when unsupported
  DotTileFn dot_tile[kMaxDType];       // optional (null: MatMul calls dot per token)
  DotRowsFn dot_rows[kMaxDType];       // optional, used where dot_tile is null
  QuantizeFn quantize_act[kMaxDType];  // indexed by partner DType (f16, bf16, q8_0, q8_1, q8_K)
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  void (*scale)(float* y, float a, int64_t n);
  // Attention micro-kernels (attention.cc), one per KV storage type (kernels/kv_row.h: f32,
  // f16, bf16, q8_0, q4_0), each reading K/V rows in their stored type and dequantizing them
  // in registers (KvValue's values exactly). Row r's results depend only on its own inputs and
  // n_keys, never on n_rows or the other rows: a (query, head) gets the same bits whatever
  // query tile or head group it is computed in.
  //   q: [n_rows] pointers to query rows in the K type's query form (PrepareAttnQuery); k, v:
  //   n_keys head rows (KvRowBytes(type, head_dim) bytes each) at k_stride / v_stride bytes
  //   apart; s, p: [n_rows, ld_s / ld_p]; acc: [n_rows] pointers to head_dim floats.
  // s[r][j] = scale * (q[r] . k[j]), each dot summed over d in a fixed order; for q8_0 and q4_0
  // K (query rounded to q8_0) the exact int32 dot of each block of 32 (q4_0: of the nibbles - 8),
  // then over the blocks b in order acc = fma(float(isum_b), dk_b * dq_b, acc) from 0: the same
  // bits on every table.
  AttnScoresFn attn_scores[kMaxDType];  // indexed by the K type; null unless IsKvType
  // acc[r][d] += sum_j p[r][j] * v[j][d], added key by key, j = 0, 1, ... A zero p leaves acc
  // unchanged (unless acc is -0, which attention's accumulators starting at +0 never are), so
  // a key masked with p = 0 costs no bits.
  AttnPvFn attn_pv[kMaxDType];  // indexed by the V type
  // P.V of a whole key tile on integer dot products, for q8_0 / q4_0 V (null for the other
  // types): per row r and V block b, the weights w[j] = p[r][j] * d[j][b] (d: key j's fp16 block
  // scale) are rounded to int16 against their largest magnitude m over the call's keys,
  // iw[j] = rint(w[j] * (kAttnPvIntLevels / m)); then for each dim i of the block, exactly,
  // isum = sum_j iw[j] * q[j][b][i] (int32; q4_0: nibble - 8), and acc[r][32b + i] =
  // fma(float(isum), m / kAttnPvIntLevels, acc). Skipped when m < kAttnPvIntMinWeight. Integer
  // sums have no order, so the bits depend on the call's keys only, not on how the KV blocks
  // cut them (attention gathers the tile's rows) nor on the rows beside r: the same on every
  // table. n_keys <= kAttnPvIntMaxKeys; p[r][j] is read for j < n_keys only.
  AttnPvIntFn attn_pv_int[kMaxDType];
  // One row's online-softmax step over its n >= 1 scores s[0..n) of a key tile: m' = max(*m,
  // max_j s[j]); s[j] = exp(s[j] - m'), s[n..n_tile) = 0; *tile_sum = sum of the new s[0..n)
  // (order fixed by n); *m = m'. Returns exp(old m - m'), the factor for the row's acc and sum
  // (0 when the old m is -inf, exactly 1 when the max did not grow).
  float (*attn_softmax)(float* s, int n, int n_tile, float* m, float* tile_sum);
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  void (*add_rms_norm)(float* x, const float* delta, const float* w, float* y, int64_t n, float eps);
  void (*softmax)(float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_fp16_table_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*softcap)(float* x, int64_t n, float cap);
  void (*add)(float* y, const float* x, int64_t n);
  // W8A8 (int8_matmul.cc): activation quantizer and exact int32 dots (1 row, 4 rows).
  float (*quantize_i8)(const float* x, int64_t n, float static_scale, int8_t* q);
  int32_t (*dot_i8)(const int8_t* w, const int8_t* x, int64_t n);
  void (*dot_i8x4)(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out);
  PackedTileFn packed_tile;                       // packed MatMul micro-kernel
  double (*read_sum)(const float* x, int64_t n);  // bandwidth probe (x 64-byte aligned)
};

// MatMul's activation row for partner type `act`: the partner blocks, then (q8_0, q8_1 only,
// from the next multiple of 4 bytes) their scales as floats [n/32]; for q8_0 then the block sums sum(q) as
// int32 [n/32] (q4_0's offset 8 comes off as 8 * sum, the packed kernels' way), for q8_1 the block sums
// d*sum(q) as floats [n/32]. The float copies are exact conversions of the fp16 fields, computed once per
// token so the dot kernels of every weight row skip the conversion; scalar kernels ignore them.
size_t ActRowBytes(DType act, int64_t n);
void PrepareActRow(const KernelTable& tab, DType act, const float* x, void* dst, int64_t n);
// Bytes of nb partner blocks of block_bytes each, rounded up to 4: the float and int32 copies
// after them start aligned (q8_0 blocks are 34 bytes).
inline size_t ActBlocksBytes(int64_t nb, size_t block_bytes) {
  return (static_cast<size_t>(nb) * block_bytes + 3) / 4 * 4;
}
// The float scales / sums that follow nb partner blocks of block_bytes each.
inline const float* ActScales(const void* x, int64_t nb, size_t block_bytes) {
  return reinterpret_cast<const float*>(static_cast<const char*>(x) + ActBlocksBytes(nb, block_bytes));
}
// A q8_0 partner row's int32 block sums [nb].
inline const int32_t* ActSumsQ8_0(const void* x, int64_t nb) {
  return reinterpret_cast<const int32_t*>(ActScales(x, nb, 34) + nb);
}

// The form of a query row that attn_scores reads for K type k_type: for q8_0 and q4_0 K the row
// rounded to q8_0 as MatMul's activations are (PrepareActRow's q8_0 row: blocks, float scales,
// int32 sums), so each score is integer block dots as llama.cpp's flash attention computes it
// (it rounds Q to K's vec-dot type, q8_0 for both); for the other K types the f32 row itself.
// AttnQueryBytes is 0 for those; PrepareAttnQuery returns q itself then, else buf
// (AttnQueryBytes bytes) filled.
inline bool AttnQueryIsQ8(DType k_type) {
  return k_type == DType::kQ8_0 || k_type == DType::kQ4_0;
}
size_t AttnQueryBytes(DType k_type, int head_dim);
const void* PrepareAttnQuery(const KernelTable& tab, DType k_type, const float* q, int head_dim, void* buf);

// The active table (first call picks it; ForceIsa replaces it).
const KernelTable& Table();
// The table of a given ISA (must be supported by the CPU).
const KernelTable& TableFor(Isa isa);

}  // namespace ferry::kernels::internal
