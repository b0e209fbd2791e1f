// The scores block of the SIMD attention kernels (only included by the ISA folders): up to 4
// query rows x 4 keys, dims in the lanes. Ops, per ISA:
//   V, kLanes                  the float vector and its lanes (V{} is zeros)
//   Fma(a, b, c)               a * b + c, fused
//   LoadK<T>(row, d, n)        dims d.. of a K row of KV type T; n < kLanes: only n are left
//                              (a ragged end), zeros above
//   LoadQ(q, d, n)             the same of a query row
//   Store(a0, a1, a2, a3, scale, nk, out)   the 4 lane sums times scale -> out[0..nk)
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/kv_row.h"

namespace ferry::kernels {
namespace {  // internal linkage: each ISA's files compile their own copy with their own flags

// One row's accumulators against the 4 keys, as named members: GCC keeps an array of vector
// accumulators in memory, storing and reloading every one of them at each step over d.
template <typename Ops>
struct ScoreQuad {
  typename Ops::V a0, a1, a2, a3;

  void Add(typename Ops::V q, typename Ops::V k0, typename Ops::V k1, typename Ops::V k2,
           typename Ops::V k3) {
    a0 = Ops::Fma(q, k0, a0);
    a1 = Ops::Fma(q, k1, a1);
    a2 = Ops::Fma(q, k2, a2);
    a3 = Ops::Fma(q, k3, a3);
  }
  void Store(float scale, int nk, float* out) const { Ops::Store(a0, a1, a2, a3, scale, nk, out); }
};

// Scores of NR (1..4) rows x 4 keys (k: 4 row pointers; unused ones repeat a valid row and their
// results are dropped). Each (row, key) accumulates kLanes lanes over d with FMAs in order (the
// ragged end of a row masked to zeros, which add exact zeros), then the lane sums: the same
// sequence whichever block the row is in.
template <typename Ops, DType T, int NR>
void ScoresBlock(const float* const* q, const uint8_t* const* k, int nk, int hd, float scale, float* s,
                 int ld_s) {
  using V = typename Ops::V;
  using Quad = ScoreQuad<Ops>;
  Quad r0{V{}, V{}, V{}, V{}}, r1 = r0, r2 = r0, r3 = r0;
  const uint8_t *k0p = k[0], *k1p = k[1], *k2p = k[2], *k3p = k[3];
  const float *q0 = q[0], *q1 = q[NR > 1 ? 1 : 0], *q2 = q[NR > 2 ? 2 : 0], *q3 = q[NR > 3 ? 3 : 0];
  // Whole vectors (n = kLanes, a constant: the full loads), then the ragged end if any.
  auto step = [&](int d, int n) {
    const V k0 = Ops::template LoadK<T>(k0p, d, n), k1 = Ops::template LoadK<T>(k1p, d, n);
    const V k2 = Ops::template LoadK<T>(k2p, d, n), k3 = Ops::template LoadK<T>(k3p, d, n);
    r0.Add(Ops::LoadQ(q0, d, n), k0, k1, k2, k3);
    if constexpr (NR > 1) r1.Add(Ops::LoadQ(q1, d, n), k0, k1, k2, k3);
    if constexpr (NR > 2) r2.Add(Ops::LoadQ(q2, d, n), k0, k1, k2, k3);
    if constexpr (NR > 3) r3.Add(Ops::LoadQ(q3, d, n), k0, k1, k2, k3);
  };
  int d = 0;
  for (; d + Ops::kLanes <= hd; d += Ops::kLanes) step(d, Ops::kLanes);
  if (d < hd) step(d, hd - d);
  r0.Store(scale, nk, s);
  if constexpr (NR > 1) r1.Store(scale, nk, s + ld_s);
  if constexpr (NR > 2) r2.Store(scale, nk, s + 2 * static_cast<int64_t>(ld_s));
  if constexpr (NR > 3) r3.Store(scale, nk, s + 3 * static_cast<int64_t>(ld_s));
}

// attn_scores by 4-key blocks: s[r][j] for n_rows rows x n_keys keys (k: the first key row, rows
// k_stride bytes apart), rows in blocks of up to kMaxRows (what the ISA's registers hold).
template <typename Ops, DType T, int kMaxRows>
void ScoresByKeyQuads(const float* const* q, int n_rows, const uint8_t* k, int64_t k_stride, int n_keys,
                      int head_dim, float scale, float* s, int ld_s) {
  ForKeyQuads(k, k_stride, n_keys, [=](int j0, int nk, const std::array<const uint8_t*, 4>& kr) {
    ForRowBlocks<kMaxRows>(n_rows, [=](auto nr, int r) {
      ScoresBlock<Ops, T, decltype(nr)::value>(q + r, kr.data(), nk, head_dim, scale,
                                               s + static_cast<int64_t>(r) * ld_s + j0, ld_s);
    });
  });
}

}  // namespace
}  // namespace ferry::kernels
