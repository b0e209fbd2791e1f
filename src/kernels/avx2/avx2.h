// AVX2+FMA+F16C kernels (namespace ferry::kernels::avx2). Only files in this folder are built
// with those ISA flags; callers reach them through the dispatch table after a cpuid check.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/packed_layout.h"

namespace ferry::kernels::avx2 {

// Activation quantizers: bit-identical to their ref:: twins.
void QuantizeActQ8_0(const float* x, void* dst, int64_t n);
void QuantizeActQ8_1(const float* x, void* dst, int64_t n);
void QuantizeActQ8_K(const float* x, void* dst, int64_t n);
void QuantizeActF16(const float* x, void* dst, int64_t n);
void QuantizeActBf16(const float* x, void* dst, int64_t n);

// Dot products, same contracts as ref::Dot*.
float DotF32(const void* w, const void* x, int64_t n);
float DotF16(const void* w, const void* x, int64_t n);
float DotBf16(const void* w, const void* x, int64_t n);
float DotQ4_0(const void* w, const void* x, int64_t n);
float DotQ4_1(const void* w, const void* x, int64_t n);
float DotQ5_0(const void* w, const void* x, int64_t n);
float DotQ5_1(const void* w, const void* x, int64_t n);
float DotQ8_0(const void* w, const void* x, int64_t n);
float DotMXFP4(const void* w, const void* x, int64_t n);
float DotQ4_K(const void* w, const void* x, int64_t n);
float DotQ5_K(const void* w, const void* x, int64_t n);
float DotQ6_K(const void* w, const void* x, int64_t n);
// Several q4_0 / q8_0 / mxfp4 weight rows against one activation row (dispatch.h DotRowsFn).
void DotRowsQ4_0(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out);
void DotRowsQ8_0(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out);
void DotRowsMXFP4(const void* w, size_t row_bytes, const void* x, int nr, int64_t n, float* out);
// One weight row against nt (1..kMaxDotTile) activation rows (dispatch.h DotTileFn).
void DotTileQ4_K(const void* w, const void* const* x, int nt, int64_t n, float* out);
void DotTileQ5_K(const void* w, const void* const* x, int nt, int64_t n, float* out);
void DotTileQ6_K(const void* w, const void* const* x, int nt, int64_t n, float* out);

// W8A8, same contracts as ref::.
float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q);
int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n);
void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out);

// Packed MatMul micro-kernel and bandwidth-probe sum, same contracts as ref::.
void PackedTile(const uint8_t* group, const internal::PackedShape& shape, const internal::PackedAct* act,
                int nt, int n_grp, float* const* y);
// x must be 32-byte aligned.
double ReadSum(const float* x, int64_t n);

float DotF32Plain(const float* a, const float* b, int64_t n);
void Axpy(float a, const float* x, float* y, int64_t n);
void Scale(float* y, float a, int64_t n);
// Attention micro-kernels of every KV type and the softmax step (attention_avx2.cc),
// contracts in dispatch.h.
void FillAttention(internal::KernelTable& t);
float AttnSoftmax(float* s, int n, int n_tile, float* m, float* tile_sum);

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);
void AddRmsNorm(float* x, const float* delta, const float* w, float* y, int64_t n, float eps);
void Softmax(float* x, int64_t n);
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n);
void GeluFp16TableMul(const float* gate, const float* up, float* out, int64_t n);
void SoftCap(float* x, int64_t n, float cap);
void AddInPlace(float* y, const float* x, int64_t n);

}  // namespace ferry::kernels::avx2
