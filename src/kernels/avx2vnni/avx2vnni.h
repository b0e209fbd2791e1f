// AVX2 + AVX-VNNI kernels (VEX vpdpbusd on 256 bits; Alder Lake, Zen 5) (namespace ferry::kernels::avx2vnni).
// Files in this folder, except table_avx2vnni.cc, are built with -mavx2 -mfma -mf16c -mavxvnni; callers reach
// them only through the dispatch table after a cpuid check.
#pragma once

#include <cstdint>

#include "kernels/dispatch.h"

namespace ferry::kernels::avx2vnni {

// Replaces the entries of t (a copy of the next-lower table) that this ISA computes natively.
// Built without ISA flags: it only takes addresses.
void Fill(internal::KernelTable& t);

// ---- packed, W8A8, ops ----
// Packed MatMul micro-kernel, same contract as ref::PackedTile.
void PackedTile(const uint8_t* group, const internal::PackedShape& shape, const internal::PackedAct* act,
                int nt, int n_grp, float* const* y);

// W8A8 int8 x int8 dots, same contracts as ref::DotI8 / ref::DotI8x4.
int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n);
void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out);
// In-place dots (weights read from the file's blocks): set the dot / dot_tile entries this
// table computes natively.
void FillKQuantDots(internal::KernelTable& t);
// ---- attention ----
// Integer P.V (dispatch.h attn_pv_int) for q8_0 / q4_0 V on vpdpwssd.
void FillAttention(internal::KernelTable& t);

}  // namespace ferry::kernels::avx2vnni
