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

// In-place dots (weights read from the file's blocks): set the dot / dot_tile entries this
// table computes natively.
void FillKQuantDots(internal::KernelTable& t);

}  // namespace ferry::kernels::avx2vnni
