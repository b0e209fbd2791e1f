// PackWeights / UnpackWeights: row-major q4_0, q8_0, mxfp4, q4_K, q6_K and int4 rows <-> the 8-row
// interleaved layout of kernels/packed_layout.h. Pure byte moves: the round trip is bit-exact.
#include <algorithm>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/packed_layout.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels {
namespace internal {

PackedShape MakePackedShape(DType t, int64_t n_out, int64_t n_in, int64_t int4_group) {
  if (t == DType::kI4G32 || t == DType::kI4G64) return {t, n_out, n_in, FerryInt4Group(t)};
  return {t, n_out, n_in, t == DType::kI4G128 ? int4_group : 32};
}

namespace {

// q4_K's 12 scale bytes <-> the 8 six-bit scales and mins (the inverse of GetScaleMinK4).
void PackK4Scales(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12]) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
  }
}

// One q4_K row <-> row r of a packed group (layout in packed_layout.h).
template <bool kToPacked>
void MoveRowQ4_K(const PackedShape& sh, uint8_t* grp, int64_t r, uint8_t* row) {
  auto* blocks = reinterpret_cast<block_q4_K*>(row);
  for (int64_t i = 0; i < sh.nsb(); ++i) {
    uint8_t* sb = grp + static_cast<size_t>(i) * kK4PackedSbBytes;
    uint8_t *sc = sb + kK4ScOffset, *mn = sb + kK4MinOffset;
    auto* d = reinterpret_cast<uint16_t*>(sb + kK4DOffset);
    block_q4_K& blk = blocks[i];
    if (kToPacked) {
      d[r] = blk.d;
      d[8 + r] = blk.dmin;
      for (int j = 0; j < 8; ++j) GetScaleMinK4(j, blk.scales, &sc[j * 8 + r], &mn[j * 8 + r]);
    } else {
      blk.d = d[r];
      blk.dmin = d[8 + r];
      uint8_t s8[8], m8[8];
      for (int j = 0; j < 8; ++j) s8[j] = sc[j * 8 + r], m8[j] = mn[j * 8 + r];
      PackK4Scales(s8, m8, blk.scales);
    }
    // Element e of sub-block j: q4_K byte qs[32 (j / 2) + e % 32], low nibble for even j.
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 4; ++k) {
        for (int b = 0; b < 4; ++b) {
          uint8_t& packed = sb[j * 128 + k * 32 + 4 * r + b];
          const int e_lo = 4 * k + b, e_hi = 16 + 4 * k + b, shift = (j % 2) * 4;
          uint8_t& src_lo = blk.qs[32 * (j / 2) + e_lo];
          uint8_t& src_hi = blk.qs[32 * (j / 2) + e_hi];
          if (kToPacked) {
            packed = static_cast<uint8_t>(((src_lo >> shift) & 0xF) | ((src_hi >> shift) & 0xF) << 4);
          } else {
            const uint8_t keep = static_cast<uint8_t>(0xF0 >> shift);  // the other sub-block's nibble
            src_lo = static_cast<uint8_t>((src_lo & keep) | (packed & 0xF) << shift);
            src_hi = static_cast<uint8_t>((src_hi & keep) | (packed >> 4) << shift);
          }
        }
      }
    }
  }
}

// Writes `width` bits of v at bit `shift` of byte b, keeping its other bits.
inline void SetBits(uint8_t& b, int shift, int width, int v) {
  const int mask = ((1 << width) - 1) << shift;
  b = static_cast<uint8_t>((b & ~mask) | ((v << shift) & mask));
}

// One q6_K row <-> row r of a packed group (layout in packed_layout.h). Element e of a q6_K
// block: low 4 bits in ql[64 (e / 128) + e % 64] (hi nibble for e % 128 >= 64), high 2 bits at
// bit 2 ((e % 128) / 32) of qh[32 (e / 128) + e % 32].
template <bool kToPacked>
void MoveRowQ6_K(const PackedShape& sh, uint8_t* grp, int64_t r, uint8_t* row) {
  auto* blocks = reinterpret_cast<block_q6_K*>(row);
  for (int64_t i = 0; i < sh.nsb(); ++i) {
    uint8_t* sb = grp + static_cast<size_t>(i) * kK6PackedSbBytes;
    auto* sc = reinterpret_cast<int8_t*>(sb + kK6ScOffset);
    auto* d = reinterpret_cast<uint16_t*>(sb + kK6DOffset);
    block_q6_K& blk = blocks[i];
    if (kToPacked) {
      d[r] = blk.d;
      for (int j = 0; j < 16; ++j) sc[j * 8 + r] = blk.scales[j];
    } else {
      blk.d = d[r];
      for (int j = 0; j < 16; ++j) blk.scales[j] = sc[j * 8 + r];
    }
    for (int c = 0; c < 8; ++c) {
      for (int half = 0; half < 2; ++half) {  // 0: sub-block 2c (lo nibbles), 1: 2c + 1 (hi)
        for (int k = 0; k < 4; ++k) {
          for (int b = 0; b < 4; ++b) {
            const int e = 32 * c + 16 * half + 4 * k + b, l = e % 128;
            uint8_t& src_lo = blk.ql[64 * (e / 128) + l % 64];
            uint8_t& src_hi = blk.qh[32 * (e / 128) + l % 32];
            const int lo_shift = 4 * (l / 64), hi_shift = 2 * (l / 32);
            uint8_t& pk_lo = sb[c * kK6ChunkBytes + k * 32 + 4 * r + b];
            uint8_t& pk_hi = sb[c * kK6ChunkBytes + kK6QhOffset + (k / 2) * 32 + 4 * r + b];
            const int pk_lo_shift = 4 * half, pk_hi_shift = 4 * (k % 2) + 2 * half;
            if (kToPacked) {
              SetBits(pk_lo, pk_lo_shift, 4, src_lo >> lo_shift);
              SetBits(pk_hi, pk_hi_shift, 2, src_hi >> hi_shift);
            } else {
              SetBits(src_lo, lo_shift, 4, pk_lo >> pk_lo_shift);
              SetBits(src_hi, hi_shift, 2, pk_hi >> pk_hi_shift);
            }
          }
        }
      }
    }
  }
}

// Moves one row's bytes between its stored form `src_row` and row r of packed group `grp`.
// kToPacked selects the direction; both directions share the index arithmetic.
template <bool kToPacked>
void MoveRow(const PackedShape& sh, uint8_t* grp, int64_t r, uint8_t* row) {
  const int64_t nb = sh.nb();
  auto mv = [](uint8_t* packed, uint8_t* plain, size_t n) {
    if (kToPacked)
      std::memcpy(packed, plain, n);
    else
      std::memcpy(plain, packed, n);
  };
  // Block b's 4-bit quants: load j, row r = the row's qs[4j .. 4j + 3].
  auto mv4 = [&](int64_t b, uint8_t* qs16) {
    for (int j = 0; j < 4; ++j) mv(grp + sh.QsAt(b) + j * 32 + 4 * r, qs16 + 4 * j, 4);
  };
  if (sh.is_q4_k()) {
    MoveRowQ4_K<kToPacked>(sh, grp, r, row);
  } else if (sh.is_q6_k()) {
    MoveRowQ6_K<kToPacked>(sh, grp, r, row);
  } else if (sh.type == DType::kQ4_0) {
    auto* blocks = reinterpret_cast<block_q4_0*>(row);
    for (int64_t b = 0; b < nb; ++b) {
      mv(grp + sh.ScalesAt(b) + 2 * r, reinterpret_cast<uint8_t*>(&blocks[b].d), 2);
      mv4(b, blocks[b].qs);
    }
  } else if (sh.is_mxfp4()) {  // q4_0's nibble moves; the e8m0 byte into the header
    auto* blocks = reinterpret_cast<block_mxfp4*>(row);
    for (int64_t b = 0; b < nb; ++b) {
      mv(grp + sh.ScalesAt(b) + r, &blocks[b].e, 1);
      mv4(b, blocks[b].qs);
    }
  } else if (sh.type == DType::kQ8_0) {
    auto* blocks = reinterpret_cast<block_q8_0*>(row);
    for (int64_t b = 0; b < nb; ++b) {
      mv(grp + sh.ScalesAt(b) + 2 * r, reinterpret_cast<uint8_t*>(&blocks[b].d), 2);
      for (int s = 0; s < 8; ++s)
        mv(grp + sh.QsAt(b) + s * 32 + 4 * r, reinterpret_cast<uint8_t*>(blocks[b].qs) + 4 * s, 4);
    }
  } else {  // int4: fp16 d | u8 z | u8 0 | qs[G/2] per group -> its unit's d [i][8] | z [i][8] | blocks
    const int64_t bpg = sh.BlocksPerGroup(), gb = static_cast<int64_t>(Int4GroupBytes(sh.group));
    for (int64_t g = 0; g < sh.ng(); ++g) {
      uint8_t* src = row + g * gb;
      mv(grp + sh.ScalesAt(g) + 2 * r, src, 2);
      mv(grp + sh.ZAt(g) + r, src + 2, 1);
      if (!kToPacked) src[3] = 0;
      const int64_t blocks = std::min(bpg, nb - g * bpg);  // fewer in a ragged last group
      for (int64_t k = 0; k < blocks; ++k) mv4(g * bpg + k, src + 4 + 16 * k);
    }
  }
}

}  // namespace
}  // namespace internal

bool CanPack(DType t, int64_t n_in) {
  if (n_in <= 0) return false;
  if (t == DType::kQ4_0 || t == DType::kQ8_0 || t == DType::kMXFP4) return n_in % 32 == 0;
  if (t == DType::kQ4_K || t == DType::kQ6_K) return n_in % 256 == 0;
  if (IsFerryInt4(t)) return true;  // any n_in: ragged last group (core/dtype.h)
  return false;
}

size_t PackedBytes(DType t, int64_t n_out, int64_t n_in) {
  return internal::MakePackedShape(t, n_out, n_in, internal::kInt4Group).TotalBytes();
}

void PackWeights(DType t, const void* w, int64_t n_out, int64_t n_in, void* dst, ThreadPool* pool) {
  internal::PackWeightsGroup(t, w, n_out, n_in, internal::kInt4Group, dst, pool);
}

void UnpackWeights(DType t, const void* packed, int64_t n_out, int64_t n_in, void* dst) {
  internal::UnpackWeightsGroup(t, packed, n_out, n_in, internal::kInt4Group, dst);
}

namespace internal {

void PackWeightsGroup(DType t, const void* w, int64_t n_out, int64_t n_in, int64_t int4_group, void* dst,
                      ThreadPool* pool) {
  const PackedShape sh = MakePackedShape(t, n_out, n_in, int4_group);
  const size_t row_bytes = sh.SrcRowBytes(), grp_bytes = sh.RowGroupBytes();
  const bool partial_unit = !sh.is_q4_k() && !sh.is_q6_k() && sh.ng() % sh.GroupsPerUnit() != 0;
  auto* out = static_cast<uint8_t*>(dst);
  auto groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      // A row's moves write every byte of its share of the group (q6_K's bit fields all of
      // theirs), so only a group with padding rows needs zeros first: a memset of every group
      // cost 3% of a gpt-oss-20b load.
      // The last unit's unused header slots (ng not a multiple of its groups) are zeroed too.
      if ((g + 1) * kPackRows > n_out) {
        std::memset(out + g * grp_bytes, 0, grp_bytes);
      } else if (partial_unit) {
        std::memset(out + g * grp_bytes + sh.UnitAt(sh.n_units() - 1), 0, sh.HeaderBytes());
      }
      for (int64_t r = 0; r < kPackRows && g * kPackRows + r < n_out; ++r) {
        // MoveRow<true> only reads the row; the cast serves the shared signature.
        auto* row = const_cast<uint8_t*>(static_cast<const uint8_t*>(w) + (g * kPackRows + r) * row_bytes);
        MoveRow<true>(sh, out + g * grp_bytes, r, row);
      }
    }
  };
  if (pool) {
    pool->ParallelFor(sh.n_groups(), groups);
  } else {
    groups(0, sh.n_groups());
  }
}

void UnpackWeightsGroup(DType t, const void* packed, int64_t n_out, int64_t n_in, int64_t int4_group,
                        void* dst) {
  const PackedShape sh = MakePackedShape(t, n_out, n_in, int4_group);
  const size_t row_bytes = sh.SrcRowBytes(), grp_bytes = sh.RowGroupBytes();
  // MoveRow<false> only reads the packed group.
  auto* in = const_cast<uint8_t*>(static_cast<const uint8_t*>(packed));
  for (int64_t o = 0; o < n_out; ++o)
    MoveRow<false>(sh, in + (o / kPackRows) * grp_bytes, o % kPackRows,
                   static_cast<uint8_t*>(dst) + o * row_bytes);
}

}  // namespace internal
}  // namespace ferry::kernels
