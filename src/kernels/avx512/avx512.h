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

// Bandwidth-probe sum, same contract as ref::ReadSum; x must be 64-byte aligned.
double ReadSum(const float* x, int64_t n);

}  // namespace ferry::kernels::avx512
