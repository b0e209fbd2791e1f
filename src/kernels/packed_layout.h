// Interleaved ("packed") weight layouts for the streaming MatMul, and Ferry's int4 row format.
// Weights are repacked once at load so that one 32-byte load feeds 8 output rows at a time:
// each 32-bit lane of a register holds 4 consecutive quants of one row, so a broadcast of 4
// activation bytes and one maddubs compute 8 rows' partial dot products, and one FMA per
// (8 rows x 32-element block) applies the scales. docs/formats.md draws the layouts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels::internal {

// Rows interleaved per group (one int32 lane each in a 256-bit register).
inline constexpr int64_t kPackRows = 8;

// Ferry int4 row format (the stored, unpacked form; DType::kI4G128 is group 128): per group of
// G elements along the input dimension, value = (q - z) * d with q, z in [0, 15]:
//   fp16 d | u8 z | u8 reserved (0) | qs[G/2]
// where within each 32-element sub-block k: qs[16k + i] = q[32k + i] | q[32k + 16 + i] << 4
// (the q4_0 nibble order per sub-block).
inline constexpr size_t Int4GroupBytes(int64_t group) {
  return 4 + static_cast<size_t>(group) / 2;
}
inline constexpr int64_t kInt4Group = 128;  // the group of DType::kI4G128
static_assert(Int4GroupBytes(kInt4Group) == 68, "int4_g128 group bytes (dtype.cc table)");

// Packed layout of one group of 8 rows, [n_in] each, nb = n_in / 32 blocks, ng = n_in / G
// scale groups (G = 32 but for int4). A unit is a header with the 8 rows' scales of U
// consecutive groups followed by the quants of those groups' blocks, so a row group is one
// sequential stream: decode is memory-bound, and a second stream (the scales as a plane of their
// own, as this layout had before) cut a core's read rate from DRAM by half or more on AMD Zen 4
// (docs/benchmarks.md). U makes every unit a whole number of 32-byte words, so no 32-byte weight
// load crosses a cache line; with one group per unit (144-byte q4_0 units, 24-byte int4
// headers) a quarter to a half of them did, which cost 4-bit prefill 8-12% on AMD Zen 3.
//   q4_0:  U = 2: d [2][8] fp16 | qs [2][4][32] u8                        = 288 bytes
//   q8_0:  U = 2: d [2][8] fp16 | qs [2][8][32] i8                        = 544 bytes
//   mxfp4: U = 4: e [4][8] u8 (e8m0) | qs [4][4][32] u8                   = 544 bytes
//          (the nibbles are e2m1 codes, looked up in kMxfp4Values: MXFP4's own bytes, reordered)
//   int4:  U = 4: d [4][8] fp16 | z [4][8] u8 | qs [4][G/32][4][32] u8    = 96 + 16 G bytes
// d [i][r] is row r's scale of the unit's group i. A row's last unit may hold fewer groups (and
// a ragged int4 group fewer blocks): its header keeps its size, the unused scales are zero.
// 4-bit: byte 4r + k of load j (j < 4) of block b = row r's original qs[4j + k] of that block,
// i.e. low nibble = element 4j + k, high nibble = element 16 + 4j + k. So `x & 0x0F` gives
// elements 4j..4j+3 of all 8 rows and `(x >> 4) & 0x0F` elements 16+4j..16+4j+3.
// 8-bit: bytes 4r..4r+3 of load s (s < 8) = row r's elements 4s..4s+3.
//   q4_K:  per super-block of 256 (nsb = n_in / 256), kK4PackedSbBytes = 1184 bytes:
//          qs [8][4][32] u8 | sc [8][8] u8 | m [8][8] u8 | d [8] fp16 | dmin [8] fp16
//          qs: sub-block j (32 elements) in the 4-bit order above (nibble pairs k, 16 + k, not
//          q4_K's k, 32 + k); sc/m [j][r]: row r's 6-bit scale and min of sub-block j, one byte
//          each (q4_K packs them into 12 bytes; 32 bytes more per group and super-block, +2.8%,
//          buy one widening load instead of the bit surgery per row and block).
//   q6_K:  per super-block of 256, kK6PackedSbBytes = 1680 bytes (8 x 210: no overhead):
//          chunks [8] of { ql [4][32] u8 | qh [2][32] u8 } | sc [16][8] i8 | d [8] fp16
//          chunk c = elements 32c..32c+31 = sub-blocks 2c (lo) and 2c + 1 (hi) of 16.
//          ql: the low 4 bits in the 4-bit order above (load k, byte 4r + b: lo nibble =
//          element 32c + 4k + b, hi nibble = element 32c + 16 + 4k + b).
//          qh: the high 2 bits of the same elements; byte 4r + b of qh load m carries loads
//          k = 2m (bits 0-1 lo, 2-3 hi) and k = 2m + 1 (bits 4-5 lo, 6-7 hi), so each field
//          reaches bits 4-5 with one shift (<< 4, << 2, none, >> 2) and an AND with 0x30.
//          sc [j][r]: row r's int8 scale of sub-block j (16 elements); d [r]: row r's fp16 d.
// Rows past n_out in the last group are zero (their outputs are dropped).
// q4_K super-block of one row group: byte offsets of its planes (layout above).
inline constexpr size_t kK4ScOffset = 1024;               // sc [8][8] u8
inline constexpr size_t kK4MinOffset = kK4ScOffset + 64;  // m [8][8] u8
inline constexpr size_t kK4DOffset = kK4MinOffset + 64;   // d [8] fp16, then dmin [8] fp16
inline constexpr size_t kK4PackedSbBytes = kK4DOffset + 32;
// q6_K super-block of one row group (layout above).
inline constexpr size_t kK6ChunkBytes = 192;                // ql [4][32] | qh [2][32]
inline constexpr size_t kK6QhOffset = 128;                  // qh within a chunk
inline constexpr size_t kK6ScOffset = 8 * kK6ChunkBytes;    // sc [16][8] i8
inline constexpr size_t kK6DOffset = kK6ScOffset + 16 * 8;  // d [8] fp16
inline constexpr size_t kK6PackedSbBytes = kK6DOffset + 16;
static_assert(kK6PackedSbBytes == 8 * sizeof(block_q6_K), "packed q6_K: the q6_K bytes, reordered");

// The 4-bit formats the packed micro-kernels' Tile4 reads (one body, three ways to read a nibble):
// q4_0 (fp16 d per block, z = 8), Ferry int4 (fp16 d and u8 z per group), MXFP4 (e8m0 per block;
// a code looks up kMxfp4Values + 12 in [0, 24], and 12 * s comes off as q4_0's 8 * s does).
// q8_0's header is q4_0's.
enum class FourBit { kQ4_0, kInt4, kMxfp4 };
// A unit's header (layout above): U groups' scales, d [U][8] fp16 or e [U][8] u8, then int4's
// z [U][8] u8; every header (and so every unit) is a whole number of 32-byte words.
inline constexpr int64_t UnitGroups(FourBit k) {
  return k == FourBit::kQ4_0 ? 2 : 4;
}
inline constexpr size_t GroupScaleBytes(FourBit k) {
  return k == FourBit::kMxfp4 ? kPackRows : 2 * kPackRows;
}
inline constexpr size_t UnitZOffset(FourBit k) {
  return UnitGroups(k) * GroupScaleBytes(k);
}
inline constexpr size_t UnitHeaderBytes(FourBit k) {
  return UnitZOffset(k) + (k == FourBit::kInt4 ? UnitGroups(k) * kPackRows : 0);
}
static_assert(UnitHeaderBytes(FourBit::kQ4_0) == 32 && UnitHeaderBytes(FourBit::kMxfp4) == 32 &&
                  UnitHeaderBytes(FourBit::kInt4) == 96,
              "the layout above: headers of whole 32-byte words");

// A row group's stream of units read front to back, as the SIMD tiles read it: NextGroup()
// moves to the next scale group (a new unit's header starts where the last unit's quants
// ended), NextQuants() takes the next block's quants. `prefetch(p, bytes)` is the tile's
// software prefetch of what was just taken. Kept to two pointers and a counter, which the
// compiler holds in registers beside a tile's accumulators (a nested unit/group loop in the
// tiles spilled them: 172 vs 46 ymm stack references, 25-45% slower on AVX2).
template <FourBit kKind>
class UnitStream {
 public:
  explicit UnitStream(const uint8_t* stream) : p_(stream), hdr_(stream) {}
  template <typename Prefetch>
  void NextGroup(Prefetch&& prefetch) {
    if (++slot_ == UnitGroups(kKind)) {
      hdr_ = p_;
      prefetch(hdr_, UnitHeaderBytes(kKind));
      p_ += UnitHeaderBytes(kKind);
      slot_ = 0;
    }
  }
  const uint8_t* Scales() const { return hdr_ + slot_ * GroupScaleBytes(kKind); }         // the group's [8]
  const uint8_t* Zeros() const { return hdr_ + UnitZOffset(kKind) + slot_ * kPackRows; }  // int4: [8] u8
  template <typename Prefetch>
  const uint8_t* NextQuants(size_t bytes, Prefetch&& prefetch) {
    const uint8_t* q = p_;
    p_ += bytes;
    prefetch(q, bytes);
    return q;
  }

 private:
  const uint8_t* p_;                      // the next header or quants
  const uint8_t* hdr_;                    // the current unit's header
  int64_t slot_ = UnitGroups(kKind) - 1;  // the current group's slot in it (the last: a unit starts next)
};

struct PackedShape {
  DType type;
  int64_t n_out, n_in;
  int64_t group;  // int4 group size (32, 64, 128); 32 for q4_0/q8_0
  // Ceilings: a Ferry int4 row may end in a ragged group (core/dtype.h), padded to whole
  // 32-element blocks; q4_0/q8_0 rows are whole blocks so these are exact for them.
  int64_t nb() const { return (n_in + 31) / 32; }
  int64_t ng() const { return (n_in + group - 1) / group; }
  int64_t n_groups() const { return (n_out + kPackRows - 1) / kPackRows; }
  int64_t nsb() const { return n_in / 256; }  // q4_K / q6_K super-blocks
  bool is_int4() const { return IsFerryInt4(type); }
  bool is_q4_k() const { return type == DType::kQ4_K; }
  bool is_q6_k() const { return type == DType::kQ6_K; }
  bool is_mxfp4() const { return type == DType::kMXFP4; }
  // q4_0 / q8_0 / mxfp4 / int4 units (layout above); q4_K / q6_K keep each super-block's
  // quants and scales together instead (these are unused for them).
  FourBit HeaderKind() const {
    return is_int4() ? FourBit::kInt4 : is_mxfp4() ? FourBit::kMxfp4 : FourBit::kQ4_0;
  }
  size_t HeaderBytes() const { return UnitHeaderBytes(HeaderKind()); }
  size_t BlockQsBytes() const { return type == DType::kQ8_0 ? 256 : 128; }
  int64_t GroupsPerUnit() const { return UnitGroups(HeaderKind()); }
  int64_t BlocksPerGroup() const { return group / 32; }
  int64_t BlocksPerUnit() const { return GroupsPerUnit() * BlocksPerGroup(); }
  int64_t n_units() const { return (ng() + GroupsPerUnit() - 1) / GroupsPerUnit(); }
  size_t UnitBytes() const { return HeaderBytes() + static_cast<size_t>(BlocksPerUnit()) * BlockQsBytes(); }
  // Byte offsets within a row group: unit u; group g's 8 scales and (int4) 8 zero points;
  // block b's quants.
  size_t UnitAt(int64_t u) const { return static_cast<size_t>(u) * UnitBytes(); }
  size_t ScalesAt(int64_t g) const {
    return UnitAt(g / GroupsPerUnit()) +
           static_cast<size_t>(g % GroupsPerUnit()) * GroupScaleBytes(HeaderKind());
  }
  size_t ZAt(int64_t g) const {
    return UnitAt(g / GroupsPerUnit()) + UnitZOffset(HeaderKind()) +
           static_cast<size_t>(g % GroupsPerUnit()) * kPackRows;
  }
  size_t QsAt(int64_t b) const {
    const int64_t bpu = BlocksPerUnit();
    return UnitAt(b / bpu) + HeaderBytes() + static_cast<size_t>(b % bpu) * BlockQsBytes();
  }
  size_t RowGroupBytes() const {
    if (is_q4_k()) return static_cast<size_t>(nsb()) * kK4PackedSbBytes;
    if (is_q6_k()) return static_cast<size_t>(nsb()) * kK6PackedSbBytes;
    return static_cast<size_t>(n_units()) * HeaderBytes() + static_cast<size_t>(nb()) * BlockQsBytes();
  }
  size_t TotalBytes() const { return RowGroupBytes() * static_cast<size_t>(n_groups()); }
  // Bytes of one row in the stored (unpacked) format.
  size_t SrcRowBytes() const { return is_int4() ? FerryInt4RowBytes(group, n_in) : RowBytes(type, n_in); }
};

// One token's activations for the packed kernels: q8_0 quantized with llama.cpp's x86
// rounding (|q| <= 127), split into planes so a 4-byte chunk is one broadcast load:
//   qs [nb][32] i8 | d [nb] f32 | s [nb] i32 (sum of the block's quants)
// For q4_K and q6_K weights the activations are q8_K as llama.cpp's vec_dot_type (one scale
// per 256), at the same offsets, so PackedActBytes / PackedActAt serve all:
//   q4_K: qs [nb][32] i8 | d [nsb] f32 | s [nb] i32 (sum of each 32-element sub-block's quants)
//   q6_K: qs [nb][32] i8 | d [nsb] f32 | s [2 nb] i32 (sum of each 16-element sub-block's)
struct PackedAct {
  const int8_t* qs;
  const float* d;
  const int32_t* s;
};
// A row whose n_in is not a multiple of 32 (ragged int4 rows) is zero-padded to whole blocks.
// Per block: 32 quants, 4 bytes of d, 8 bytes of s (q6_K's two sums; the others use 4).
inline size_t PackedActBytes(int64_t n_in) {
  return static_cast<size_t>((n_in + 31) / 32) * 44;
}
inline PackedAct PackedActAt(const void* base, int64_t n_in) {
  const auto* p = static_cast<const uint8_t*>(base);
  const int64_t nb = (n_in + 31) / 32;
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const float*>(p + nb * 32),
          reinterpret_cast<const int32_t*>(p + nb * 36)};
}

inline constexpr int kMxfp4Bias = 12;
// kMxfp4Values + kMxfp4Bias: the 16-entry table of the kernels' byte shuffle.
alignas(16) inline constexpr int8_t kMxfp4Biased[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                        12, 11, 10, 9,  8,  6,  4,  0};
static_assert(
    [] {
      for (int i = 0; i < 16; ++i)
        if (kMxfp4Biased[i] != kMxfp4Values[i] + kMxfp4Bias) return false;
      return true;
    }(),
    "kMxfp4Biased = kMxfp4Values + kMxfp4Bias");

// Most tokens one micro-kernel call handles (weights unpacked once, used kMaxTileTokens times).
inline constexpr int kMaxTileTokens = 4;
// Most row groups one call handles: the 512-bit kernels hold two 8-row groups per register
// (a group's 32-byte load in each half; the activation broadcast serves both).
inline constexpr int kMaxTileGroups = 2;

// Micro-kernel over n_grp (1..kMaxTileGroups) consecutive packed row groups (group i at
// grp + i * shape.RowGroupBytes()) and nt (1..kMaxTileTokens) tokens; y[t]: [8 * n_grp]:
//   y[t][r] = sum_b fma-chain of (d_w[r,b] * d_x[t,b]) * float(isum[t,r,b]),
// accumulated block by block in order into one float per (t, r), whatever nt or n_grp is:
// the result for a token is bit-identical in any tile (batch invariance) and equal to the
// scalar twin.
//   isum = sum_i q[r,i] * x[t,i] - z[r] * s[t,b]   (z = 8 for q4_0, 0 for q8_0, stored for int4)
// (mxfp4: q = kMxfp4Values[code], z = 0, d_w = E8M0ToFp32Half(e): the in-place dot's chain)
// The k-quants run the chain per super-block b of 256 instead: q6_K with
//   isum = sum_j sc[r,j] * (sum_{i in j} q[r,i] * x[t,i] - 32 * s[t,j])   (16 sub-blocks j),
// q4_K with two links per super-block (d * S, then -dmin * M; see ref::PackedTile).
using PackedTileFn = void (*)(const uint8_t* grp, const PackedShape& shape, const PackedAct* act, int nt,
                              int n_grp, float* const* y);

// Shape of [n_out, n_in] weights of type t. int4_group only matters for int4_g128 (a test hook
// for other group sizes); int4_g32/int4_g64 always use their own group.
PackedShape MakePackedShape(DType t, int64_t n_out, int64_t n_in, int64_t int4_group);
// PackWeights / UnpackWeights / MatMulPacked with an explicit int4 group size (32, 64 or 128;
// the stored rows then use Int4GroupBytes(int4_group) per group): kernels and tests only.
void PackWeightsGroup(DType t, const void* w, int64_t n_out, int64_t n_in, int64_t int4_group, void* dst,
                      ThreadPool* pool);
void UnpackWeightsGroup(DType t, const void* packed, int64_t n_out, int64_t n_in, int64_t int4_group,
                        void* dst);
void MatMulPackedGroup(const void* packed, DType t, int64_t n_out, int64_t n_in, int64_t int4_group,
                       const float* x, int64_t n_tok, float* y, ThreadPool* pool);
// One token's f32 activations [n_in] -> PackedAct planes at dst [PackedActBytes(n_in)]:
// q8_0 planes, or q8_K planes for weights of type q4_K or q6_K.
void PreparePackedAct(DType weights, const float* x, int64_t n_in, void* dst);

}  // namespace ferry::kernels::internal
