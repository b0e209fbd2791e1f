// Scalar truth for every kernel (namespace ferry::kernels::ref): ggml-exact conversions,
// integer-exact quantized dot products, and naive attention for tests. No ISA flags here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/packed_layout.h"

namespace ferry::kernels::ref {

// ---- Conversion (bit-exact with ggml's dequantize_row_* / quantize_row_*_ref) ----------
bool CanDequantize(DType t);
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);  // dst: [n]
bool CanQuantize(DType t);
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);  // src: [n]

// q4_K / q6_K reference quantization (quantize_row_q4_K_ref / quantize_row_q6_K_ref).
void QuantizeRowQ4_K(const float* x, void* dst, int64_t n);  // dst: [n/256] block_q4_K
void QuantizeRowQ6_K(const float* x, void* dst, int64_t n);  // dst: [n/256] block_q6_K

// Ferry int4 rows (packed_layout.h), group 32/64/128: round-to-nearest asymmetric.
void QuantizeRowInt4(const float* x, void* dst, int64_t n, int64_t group);    // dst: [n/G] groups
void DequantizeRowInt4(const void* src, float* y, int64_t n, int64_t group);  // y: [n]

// ---- Activation quantization for MatMul ------------------------------------------------
// llama.cpp's x86 (AVX/AVX2) quantize_row_q8_0 / q8_1 semantics, which differ from the file
// reference: d = amax/127, id = 127/amax, round half to even. q8_K equals the reference.
void QuantizeActQ8_0(const float* x, void* dst, int64_t n);  // dst: [n/32] block_q8_0
void QuantizeActQ8_1(const float* x, void* dst, int64_t n);  // dst: [n/32] block_q8_1
void QuantizeActQ8_K(const float* x, void* dst, int64_t n);  // dst: [n/256] block_q8_K
void QuantizeActF16(const float* x, void* dst, int64_t n);   // dst: [n] fp16
void QuantizeActBf16(const float* x, void* dst, int64_t n);  // dst: [n] bf16

// ---- Dot products: weight row (type in name) x activation row (its partner type) ---------
// n elements; quantized types need n % block == 0. Integer parts are exact; floats in double,
// except q4_0 / q8_0: fma per block into one float, the packed path's order (ref::PackedTile).
float DotF32(const void* w, const void* x, int64_t n);
float DotF16(const void* w, const void* x, int64_t n);    // x: fp16
float DotBf16(const void* w, const void* x, int64_t n);   // x: bf16
float DotQ4_0(const void* w, const void* x, int64_t n);   // x: q8_0
float DotQ4_1(const void* w, const void* x, int64_t n);   // x: q8_1
float DotQ5_0(const void* w, const void* x, int64_t n);   // x: q8_0
float DotQ5_1(const void* w, const void* x, int64_t n);   // x: q8_1
float DotQ8_0(const void* w, const void* x, int64_t n);   // x: q8_0
float DotMXFP4(const void* w, const void* x, int64_t n);  // x: q8_0, q4_0's float order
float DotQ2_K(const void* w, const void* x, int64_t n);   // x: q8_K
float DotQ3_K(const void* w, const void* x, int64_t n);   // x: q8_K
float DotQ4_K(const void* w, const void* x, int64_t n);   // x: q8_K
float DotQ5_K(const void* w, const void* x, int64_t n);   // x: q8_K
float DotQ6_K(const void* w, const void* x, int64_t n);   // x: q8_K

// ---- W8A8 (kernels.h MatMulW8A8) ----------------------------------------------------------
// q[n] = clamp(round_half_even(x / s), -127, 127); s = static_scale if > 0, else max|x|/127.
// Returns s.
float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q);
// sum_i w[i] * x[i] in int32 (exact for n <= kMaxW8A8In).
int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n);
// out[r] = DotI8(w + r * w_stride, x, n) for r < 4.
void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out);

// Packed MatMul micro-kernel (packed_layout.h PackedTileFn): the scalar truth.
void PackedTile(const uint8_t* group, const internal::PackedShape& shape, const internal::PackedAct* act,
                int nt, int n_grp, float* const* y);
// Sum of floats (bandwidth probe), any order.
double ReadSum(const float* x, int64_t n);

// ---- Vector helpers (attention inner loops) ---------------------------------------------
float DotF32Plain(const float* a, const float* b, int64_t n);  // float accumulation, in order
void Axpy(float a, const float* x, float* y, int64_t n);       // y += a * x
void Scale(float* y, float a, int64_t n);                      // y *= a
// Attention micro-kernels of every KV type (contracts in dispatch.h attn_scores / attn_pv /
// attn_softmax) into t.
void FillAttention(internal::KernelTable& t);
float AttnSoftmax(float* s, int n, int n_tile, float* m, float* tile_sum);

// ---- Elementwise / normalization --------------------------------------------------------
void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);
void AddRmsNorm(float* x, const float* delta, const float* w, float* y, int64_t n, float eps);
void Softmax(float* x, int64_t n);
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n);
void GeluFp16TableMul(const float* gate, const float* up, float* out, int64_t n);
// GeluFp16TableMul's table: [65536 + 1] fp16 bits, entry h = fp16(gelu_tanh(fp16 h)); the last
// entry is padding, so a 4-byte gather at entry 65535 stays inside. Built on first use.
const uint16_t* GeluFp16Table();
void SoftCap(float* x, int64_t n, float cap);
void SwigluOaiMul(const float* gate, const float* up, float* out, int64_t n);
void AddInPlace(float* y, const float* x, int64_t n);
void Rope(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, bool neox);
void HadamardRotate(float* x, int n_heads, int head_dim);

// Head row `row` (= token slot * n_kv_heads + KV head) of a KV cache of type t, as floats [head_dim].
void KvHeadRow(DType t, const void* cache, int64_t row, int head_dim, float* out);

// The query values attention's scores multiply against K type k_type: q itself, or for q8_0 /
// q4_0 K q rounded to q8_0 (dispatch.h PrepareAttnQuery), as floats [head_dim].
std::vector<float> QueryAsRead(DType k_type, const float* q, int head_dim);
// Naive causal attention (materialized scores, then softmax) for tests; same contract as
// kernels::Attention, single-threaded; with a q8_0 or q4_0 K cache the query is rounded to q8_0 first,
// as kernels::Attention defines it (dispatch.h PrepareAttnQuery). pv_int_bound (may be null):
// [n_q, n_heads, dv] the most the integer P.V's int16 weights (dispatch.h attn_pv_int, q8_0 /
// q4_0 V; 0 for the other V types) can move each output, for any cut of the keys into calls
// of up to kAttnPvIntMaxKeys consecutive keys: a call's weights are rounded to within half of
// max_j(p_j |d_j|) / 32767, so an output moves by at most 0.5 / 32767 * sum_j |q_j| *
// max(pi_i |d_i|) over the keys i within kAttnPvIntMaxKeys - 1 of j (pi: the softmax weights).
void AttentionNaive(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
                    float scale, const KvBlocks& kv, float* out, float* pv_int_bound = nullptr);
// kernels::AttentionSparse's rules with a double softmax (progressive INT8 scores formed as
// the kernel forms them). skipped_mass (may be null): [n_q, n_heads] softmax weight dropped
// with the skipped V rows.
void AttentionSparseNaive(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads,
                          int head_dim, float scale, const KvBlocks& kv, const AttentionSparsity& sparsity,
                          float* out, AttentionSparseCounts* counts, double* skipped_mass);

}  // namespace ferry::kernels::ref
