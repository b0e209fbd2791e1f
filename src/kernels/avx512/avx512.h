// AVX-512 F+BW+VL+DQ kernels (512-bit registers, mask registers) (namespace ferry::kernels::avx512). Files in
// this folder, except table_avx512.cc, are built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
// -mf16c; callers reach them only through the dispatch table after a cpuid check.
#pragma once

#include <cstdint>

#include "kernels/dispatch.h"

namespace ferry::kernels::avx512 {

// Replaces the entries of t (a copy of the next-lower table) that this ISA computes natively.
// Built without ISA flags: it only takes addresses.
void Fill(internal::KernelTable& t);

// In-place dots (weights read from the file's blocks): set the dot / dot_tile entries this
// table computes natively.
void FillKQuantDots(internal::KernelTable& t);
// Float-like dots, same contracts as ref::Dot*.
float DotF32(const void* w, const void* x, int64_t n);
float DotF16(const void* w, const void* x, int64_t n);
float DotBf16(const void* w, const void* x, int64_t n);
// attention: the score and P.V micro-kernels of every KV type (attention_avx512.cc); the
// softmax step stays AVX2's. Defined in an ISA-flagged file, called only by Fill.
void FillAttention(internal::KernelTable& t);

// Bandwidth-probe sum, same contract as ref::ReadSum; x must be 64-byte aligned.
double ReadSum(const float* x, int64_t n);

// ---- packed, W8A8, ops ----
// Packed MatMul micro-kernel, same contract as ref::PackedTile.
void PackedTile(const uint8_t* group, const internal::PackedShape& shape, const internal::PackedAct* act,
                int nt, int n_grp, float* const* y);

// W8A8, same contracts as ref::QuantizeActInt8 / DotI8 / DotI8x4.
float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q);
int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n);
void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out);

}  // namespace ferry::kernels::avx512
