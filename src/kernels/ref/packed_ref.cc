// Scalar twin of the packed MatMul micro-kernel (kernels/packed_layout.h): integer block sums,
// then acc = fma(d_w * d_x, float(isum), acc) block by block, exactly the operations (and
// order) of the SIMD kernels, so every ISA gives the same bits.
#include <cmath>

#include "core/fp16.h"
#include "kernels/packed_layout.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {

namespace {

// Element e (0..31) of row r in a packed 4-bit block of 128 bytes (layout: packed_layout.h).
int Nibble(const uint8_t* block, int r, int e) {
  const int ee = e % 16;
  const uint8_t byte = block[(ee / 4) * 32 + 4 * r + ee % 4];
  return e < 16 ? (byte & 0x0F) : (byte >> 4);
}

// One 8-row group of q4_K: per super-block and row, S = sum_j sc_j * isum_j and
// M = sum_j m_j * xsum_j (exact int32), then acc = fma(d * d_x, S, acc) and
// acc = fma(-(dmin * d_x), M, acc).
void GroupQ4_K(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
               float* const* y, int y_off) {
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < internal::kPackRows; ++r) {
      float acc = 0.f;
      for (int64_t i = 0; i < sh.nsb(); ++i) {
        const uint8_t* sb = grp + static_cast<size_t>(i) * internal::kK4PackedSbBytes;
        const uint8_t *sc = sb + internal::kK4ScOffset, *mn = sb + internal::kK4MinOffset;
        const auto* d = reinterpret_cast<const uint16_t*>(sb + internal::kK4DOffset);
        int32_t S = 0, M = 0;
        for (int j = 0; j < 8; ++j) {
          const int8_t* xq = act[t].qs + i * 256 + j * 32;
          int32_t isum = 0;
          for (int e = 0; e < 32; ++e) isum += Nibble(sb + j * 128, r, e) * xq[e];
          S += sc[j * 8 + r] * isum;
          M += mn[j * 8 + r] * act[t].s[i * 8 + j];
        }
        const float dx = act[t].d[i];
        acc = std::fma(Fp16ToFp32(d[r]) * dx, static_cast<float>(S), acc);
        acc = std::fma(-(Fp16ToFp32(d[8 + r]) * dx), static_cast<float>(M), acc);
      }
      y[t][y_off + r] = acc;
    }
  }
}

// Element e (0..31) of row r in chunk c (192 bytes) of a packed q6_K super-block: 0..63.
int Q6(const uint8_t* chunk, int r, int e) {
  const int half = e / 16, k = (e % 16) / 4, b = e % 4;
  const int lo = (chunk[k * 32 + 4 * r + b] >> (4 * half)) & 0x0F;
  const int hi = (chunk[internal::kK6QhOffset + (k / 2) * 32 + 4 * r + b] >> (4 * (k % 2) + 2 * half)) & 3;
  return lo | hi << 4;
}

// One 8-row group of q6_K: per super-block and row the exact int32
// S = sum_j sc_j * (isum_j - 32 * xsum_j) over the 16 sub-blocks of 16 (isum_j over the unsigned
// quants), then acc = fma(d * d_x, S, acc).
void GroupQ6_K(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
               float* const* y, int y_off) {
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < internal::kPackRows; ++r) {
      float acc = 0.f;
      for (int64_t i = 0; i < sh.nsb(); ++i) {
        const uint8_t* sb = grp + static_cast<size_t>(i) * internal::kK6PackedSbBytes;
        const auto* sc = reinterpret_cast<const int8_t*>(sb + internal::kK6ScOffset);
        const auto* d = reinterpret_cast<const uint16_t*>(sb + internal::kK6DOffset);
        int32_t S = 0;
        for (int j = 0; j < 16; ++j) {
          const int8_t* xq = act[t].qs + i * 256 + j * 16;
          int32_t isum = 0;
          for (int e = 0; e < 16; ++e)
            isum += Q6(sb + (j / 2) * internal::kK6ChunkBytes, r, 16 * (j % 2) + e) * xq[e];
          S += sc[j * 8 + r] * (isum - 32 * act[t].s[i * 16 + j]);
        }
        acc = std::fma(Fp16ToFp32(d[r]) * act[t].d[i], static_cast<float>(S), acc);
      }
      y[t][y_off + r] = acc;
    }
  }
}

// One 8-row group.
void Group(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
           float* const* y, int y_off) {
  const int64_t nb = sh.nb();
  const bool q8 = sh.type == DType::kQ8_0, int4 = sh.is_int4(), mx = sh.is_mxfp4();
  const int64_t bpg = sh.BlocksPerGroup();
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < internal::kPackRows; ++r) {
      float acc = 0.f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* scales = grp + sh.ScalesAt(b / bpg);  // d [8] fp16, or e [8] u8
        const uint8_t* qb = grp + sh.QsAt(b);
        const float dw =
            mx ? E8M0ToFp32Half(scales[r]) : Fp16ToFp32(reinterpret_cast<const uint16_t*>(scales)[r]);
        const int z = int4 ? grp[sh.ZAt(b / bpg) + r] : (q8 || mx ? 0 : 8);
        const int8_t* xq = act[t].qs + b * 32;
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) {
          int q;
          if (q8) {
            q = static_cast<int8_t>(qb[(i / 4) * 32 + 4 * r + i % 4]);
          } else if (mx) {
            q = kMxfp4Values[Nibble(qb, r, i)];
          } else {
            q = Nibble(qb, r, i);
          }
          isum += q * xq[i];
        }
        isum -= z * act[t].s[b];
        const float sc = dw * act[t].d[b];
        acc = std::fma(sc, static_cast<float>(isum), acc);
      }
      y[t][y_off + r] = acc;
    }
  }
}

}  // namespace

void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  const auto group = sh.is_q4_k() ? GroupQ4_K : sh.is_q6_k() ? GroupQ6_K : Group;
  for (int gi = 0; gi < n_grp; ++gi)
    group(grp + static_cast<size_t>(gi) * sh.RowGroupBytes(), sh, act, nt, y,
          gi * static_cast<int>(internal::kPackRows));
}

}  // namespace ferry::kernels::ref
