// Public kernel API: raw pointers and sizes only (no model config, request or block-table
// objects). Each entry forwards to the implementation chosen once at start-up from cpuid
// (FERRY_ISA=scalar|avx2|avx2vnni|avx512|avx512vnni forces one); ref/ holds the scalar truth for every
// kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace ferry::kernels {

// Kernel tables, one per instruction-set level (dispatch.cc). Not a strict chain: an Alder
// Lake has AVX-VNNI without AVX-512, a Skylake-X AVX-512 without VNNI.
//   avx2:       AVX2 + FMA + F16C (Haswell, Zen 1-3)
//   avx2vnni:   + AVX-VNNI (VEX vpdpbusd on 256 bits; Alder Lake, Zen 5)
//   avx512:     AVX-512 F + BW + VL + DQ (Skylake-X)
//   avx512vnni: + AVX512_VNNI, and AVX512_BF16 where present (Ice Lake, Zen 4/5, Sapphire Rapids)
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx2Vnni = 2, kAvx512 = 3, kAvx512Vnni = 4 };
inline constexpr int kNumIsas = 5;
// "scalar", "avx2", "avx2vnni", "avx512", "avx512vnni" (the FERRY_ISA spellings).
const char* IsaName(Isa isa);
// The ISA in use (cpuid, overridden by FERRY_ISA). Fixed after the first call unless ForceIsa.
Isa ActiveIsa();
// Whether this CPU can run isa's table.
bool IsaSupported(Isa isa);
// Every ISA this CPU runs, scalar first (tests loop over these).
std::vector<Isa> SupportedIsas();
// The table chosen when FERRY_ISA is unset: the fastest this CPU runs.
Isa BestSupportedIsa();
// Checks FERRY_ISA (unset, "auto" or a supported IsaName): "" when fine, else the reason (an
// unknown name, or an ISA this CPU lacks). The ferry command calls it first and exits on an
// error; Table() aborts with the same message if it was never called.
std::string CheckIsaEnv();
// Forces an ISA (tests go through a scoped guard). Returns false if the CPU lacks it.
bool ForceIsa(Isa isa);
// The CPU's model name (cpuid brand string), e.g. "AMD EPYC 9B45 ..."; "unknown" when absent.
std::string CpuModelName();

// ---- Conversion ----------------------------------------------------------------------
// Whether DequantizeRow supports t (all stored weight types do: f32, f16, bf16, q4_0, q4_1,
// q5_0, q5_1, q8_0, q2_k..q6_k, q8_k, mxfp4).
bool CanDequantize(DType t);
// dst[n] = float(src). n must be a multiple of the block size of t. Bit-exact with ggml.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);
// Whether QuantizeRow supports t (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q8_k,
// q4_k, q6_k, mxfp4).
bool CanQuantize(DType t);
// dst = quantize(src[n]) with ggml's reference rounding. n multiple of the block size.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

// ---- Linear algebra -------------------------------------------------------------------
// y[t][o] = sum_i W[o][i] * x[t][i] for t < n_tok, o < n_out.
//   w: [n_out, n_in] rows of type w_type, densely packed (row bytes = RowBytes(w_type, n_in)).
//   x: [n_tok, n_in] f32, y: [n_tok, n_out] f32.
// Weights are never expanded to f32 in memory: dequantization is fused into the dot product.
// Activations are quantized on the fly to the weight type's partner (MatMulActivationType:
// q8_0 for q4_0/q5_0/q8_0, q8_1 for q4_1/q5_1, q8_k for k-quants, f16/bf16 for f16/bf16) with
// llama.cpp's x86 AVX2 rounding, so results track its goldens on this machine kind.
// The reduction order of y[t][o] depends only on (w, x[t]), never on n_tok or threads:
// a request's output is independent of what else is in the batch.
// Parallel over output rows with `pool` (may be null for single-threaded).
void MatMul(const void* w, DType w_type, int64_t n_out, int64_t n_in, const float* x, int64_t n_tok, float* y,
            ThreadPool* pool);
// Whether MatMul supports weights of type t.
bool CanMatMul(DType t);
// The type MatMul converts activations to for weights of type t (llama.cpp's vec_dot_type):
// f32 -> f32, f16 -> f16, bf16 -> bf16, q4_0/q5_0/q8_0/mxfp4 -> q8_0, q4_1/q5_1 -> q8_1,
// q2_k..q6_k -> q8_k. Only meaningful when CanMatMul(t).
DType MatMulActivationType(DType t);

// ---- Sparse products (contextual FFN sparsity) ----------------------------------------
// y[j] = W[rows[j]] . x for j < n_rows; only the selected rows of w: [n_out, n_in] (rows of
// w_type, as MatMul) are read. x: [n_in] is converted once exactly as MatMul converts it, and
// the same dot kernel runs, so y[j] equals MatMul's y[rows[j]] bit for bit. Threads split rows.
void MatVecRows(const void* w, DType w_type, int64_t n_in, const int32_t* rows, int64_t n_rows,
                const float* x, float* y, ThreadPool* pool);
// y[n_out] = sum over j < n_rows of h[j] * Wt[rows[j]], Wt: [n_neurons, n_out] rows of
// wt_type (a transposed down projection, so a skipped neuron is a skipped row). Threads split
// blocks of 32 rows, each summed into its own partial, partials added in block order: each
// element's sum order is fixed whatever the thread count.
// wt_type: any DequantizeRow type; n_out a multiple of its block size.
void AxpyRows(const void* wt, DType wt_type, int64_t n_out, const int32_t* rows, const float* h,
              int64_t n_rows, float* y, ThreadPool* pool);

// ---- Packed weights: repacked once at load, streamed by MatMulPacked -------------------
// Words used here and in packed_layout.h: a *row tile* is the 8 weight rows interleaved so one
// 32-byte load feeds 8 rows; a *block* is the type's quantization unit along n_in (32 values
// for q4_0/q8_0, 32/64/128 for Ferry int4_g32/g64/g128, core/dtype.h); a *KV head group* (in
// the attention part) is the query heads sharing one KV head. Layouts in packed_layout.h and
// docs/formats.md: row tiles, scales in their own plane. Types: q4_0, q8_0 (n_in % 32 == 0)
// and Ferry int4 (any n_in: a ragged last block); any n_out (the last row tile is zero-padded).
bool CanPack(DType t, int64_t n_in);
// Bytes PackWeights writes for [n_out, n_in] weights of type t.
size_t PackedBytes(DType t, int64_t n_out, int64_t n_in);
// dst[PackedBytes] = pack(w: [n_out, n_in] rows of type t, RowBytes each). Parallel over rows.
void PackWeights(DType t, const void* w, int64_t n_out, int64_t n_in, void* dst, ThreadPool* pool);
// The exact inverse: dst [n_out, RowBytes(t, n_in)] = the original rows.
void UnpackWeights(DType t, const void* packed, int64_t n_out, int64_t n_in, void* dst);
// y[t][o] = sum_i W[o][i] * x[t][i] with W packed by PackWeights; x: [n_tok, n_in] f32,
// y: [n_tok, n_out]. Activations become q8_0 (llama.cpp's x86 rounding) once per call; each
// (token, row) sums its 32-element blocks in order into one float accumulator, so y[t] is
// bit-identical whatever n_tok, the tiling or the thread count (and equal across ISAs).
// Weight blocks are reused across up to 4 tokens per load (prefill GEMM), threads split rows.
void MatMulPacked(const void* packed, DType t, int64_t n_out, int64_t n_in, const float* x, int64_t n_tok,
                  float* y, ThreadPool* pool);

// ---- W8A8: int8 weights x int8 activations (SmoothQuant path) ---------------------------
// Integer sums are int32, exact while n_in <= kMaxW8A8In (128 * 128 * n_in < 2^31).
inline constexpr int64_t kMaxW8A8In = 131072;
// Activation row -> int8: q[i] = clamp(round_half_even(x[i] / s), -127, 127), where
// s = static_scale when > 0 (static per-tensor scale), else s = max|x| / 127 (per-token
// dynamic; 0 for an all-zero row, which quantizes to zeros). Returns s. q: [n].
float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q);
// y[t][o] = (s_t * w_scale[o]) * sum_i W[o][i] * q_t[i], the sum exact in int32, where q_t, s_t
// = QuantizeActInt8(x[t], input_scale).
//   w: [n_out, n_in] int8 (any value, -128 included), w_scale: [n_out] f32 (per output
//   channel), x: [n_tok, n_in] f32, y: [n_tok, n_out] f32; any n_in <= kMaxW8A8In (no block
//   constraint). input_scale <= 0 selects per-token dynamic activation scales.
// Bit-identical across ISAs, n_tok and thread counts. Parallel over output rows with `pool`.
void MatMulW8A8(const int8_t* w, const float* w_scale, int64_t n_out, int64_t n_in, const float* x,
                int64_t n_tok, float input_scale, float* y, ThreadPool* pool);

// ---- Memory bandwidth probe -------------------------------------------------------------
// Streams `bytes` (rounded down to 4 KiB) of a buffer it allocates and touches first, `reps`
// times, each thread of `pool` summing its contiguous slice with SIMD loads; returns the best
// rep's read bandwidth in bytes/s. Use a buffer far larger than the last-level cache.
double MeasureReadBandwidth(size_t bytes, int reps, ThreadPool* pool);

// ---- Elementwise / normalization --------------------------------------------------------
// y[n] = x[n] / sqrt(mean(x^2) + eps) * w[n]   (y may alias x)
void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);
// Residual add fused with the next norm (one pass over x instead of two):
// x[n] += delta[n]; y[n] = RmsNorm(x, w, eps). Bit-identical to AddInPlace then RmsNorm.
void AddRmsNorm(float* x, const float* delta, const float* w, float* y, int64_t n, float eps);
// x[n] = softmax(x[n]) in place (max-subtracted).
void Softmax(float* x, int64_t n);
// out[n] = silu(gate[n]) * up[n]   (out may alias gate or up)
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
// out[n] = gelu_tanh(gate[n]) * up[n] (gemma's GeGLU; out may alias gate or up), with
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as the equal
// x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), which keeps its precision for negative x.
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n);
// out[n] = gelu(gate[n]) * up[n] as llama.cpp's CPU backend computes GeGLU (GGML_GELU_FP16):
// gate rounded to fp16 indexes a table of fp16(gelu_tanh(h)), each entry computed in f32 by
// ggml_gelu_f32's expression (its 1 + 0.044715 x^2 fused, as a -march=native build of ggml
// contracts it: all 65536 entries equal that build's ggml_table_gelu_f16); out is 0 where
// gate <= -10 and gate * up where gate >= 10. Every table computes the same bits. A step
// function of gate (fp16 steps), so GGUF files compute what llama.cpp computes from them.
void GeluFp16TableMul(const float* gate, const float* up, float* out, int64_t n);
// x[n] = cap * tanh(x[n] / cap) in place (gemma2's soft-capping of attention scores and
// logits). The scalar table uses tanhf as ggml does; the SIMD ones the identity
// tanh(t) = sign(t) (1 - e) / (1 + e), e = exp(-2|t|), within 3e-7 * cap of it (exp's 2 ulp
// through the quotient, plus its roundings).
void SoftCap(float* x, int64_t n, float cap);
// gpt-oss's experts (llama.cpp's ggml_swiglu_oai, alpha 1.702, limit 7): with g = min(gate, 7),
// out[n] = g / (1 + exp(-1.702 g)) * (clamp(up, -7, 7) + 1)   (out may alias gate or up).
// Scalar on every table (the experts' matmuls dominate).
void SwigluOaiMul(const float* gate, const float* up, float* out, int64_t n);
// y[n] += x[n]
void AddInPlace(float* y, const float* x, int64_t n);

// Rotary embedding in place on x: [n_heads, head_dim], rotating the first rot_dim dims of
// each head; cs: [rot_dim/2, 2] the cos and sin of pair j's angle (the model's RopeAngles, any
// scaling and magnitude applied). Each pair (x0, x1) becomes (fma(x0, c, -(x1 s)),
// fma(x0, s, x1 c)): llama.cpp's rotation as GCC compiles it on x86, bit for bit.
//   neox = false: pairs are (2j, 2j+1) (llama.cpp LLAMA "normal" rope, llama2.c).
//   neox = true:  pairs are (j, j + rot_dim/2) (HF rotate-half, qwen2).
void Rope(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, bool neox);

// x: [n_heads, head_dim] in place, each head times the orthonormal Walsh-Hadamard matrix
// H / sqrt(head_dim) (head_dim a power of two; H symmetric, so applying it twice is the
// identity). Rotating q and k alike leaves every q.k unchanged while spreading a key's outlier
// channels over all dims before the K cache rounds them (--cache-rotate).
void HadamardRotate(float* x, int n_heads, int head_dim);

// ---- Attention ------------------------------------------------------------------------
// K/V for one sequence and one layer, stored in fixed-size blocks:
//   k_cache, v_cache: [num_blocks, block_size, n_kv_heads, head row] where a head row is
//     head_dim values of k_type / v_type (kernels/kv_row.h: f32, f16, bf16, or q8_0 / q4_0
//     blocks of 32 along head_dim: KvRowBytes(type, head_dim) bytes)
//   block_table[i]: physical block holding logical tokens [i*block_size, (i+1)*block_size)
struct KvBlocks {
  const void* k_cache;
  const void* v_cache;
  const int32_t* block_table;
  int32_t block_size;
  // Optional INT8 copy of K (progressive attention), same block table; null when absent:
  //   k_i8: [num_blocks, block_size, n_kv_heads, head_dim], k_i8_scale: [num_blocks, block_size,
  //   n_kv_heads]; key row = k_i8 * scale, quantized by QuantizeActInt8 (dynamic scale).
  const int8_t* k_i8 = nullptr;
  const float* k_i8_scale = nullptr;
  DType k_type = DType::kF32;
  DType v_type = DType::kF32;
  // > 0: no V rows of their own: a key's value is the first v_in_k values of its K row
  // (multi-head latent attention's cache, whose V is the latent part of K): v_cache is ignored,
  // v_type must equal k_type, and attention's output has v_in_k values per head.
  int32_t v_in_k = 0;
  int32_t ValueDim(int32_t head_dim) const { return v_in_k > 0 ? v_in_k : head_dim; }
};

// Causal attention of n_q query tokens of one sequence against its cached keys:
//   q:     [n_q, n_heads, head_dim]; query t attends keys at positions 0..q_pos[t] inclusive
//   out:   [n_q, n_heads, kv.ValueDim(head_dim)]
// GQA: query head h reads kv head h / (n_heads / n_kv_heads). scale is usually 1/sqrt(head_dim).
// Parallel over (query, head) with pool (may be null).
// Gemma's variants (the defaults: plain causal attention as above).
struct AttentionVariant {
  // > 0: the query at position p attends keys p - window + 1 .. p only (a sliding-window layer;
  // llama.cpp's LLAMA_SWA_TYPE_STANDARD masks p - key >= window).
  int32_t window = 0;
  // > 0: every score s becomes cap * tanh(s / cap) before the softmax (gemma2's attention soft-capping).
  float logit_softcap = 0.f;
  // gpt-oss's learned attention sinks: [n_heads] logits, one per query head, that join each
  // softmax's denominator and attend no value: out = sum_j exp(s_j) v_j / (exp(sink) + sum_j
  // exp(s_j)). null: none.
  const float* sinks = nullptr;
};
void Attention(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
               float scale, const KvBlocks& kv, float* out, ThreadPool* pool,
               const AttentionVariant& variant = {});

// The attention each cached key received (H2O's heavy-hitter score), same arguments as
// Attention: acc[j] += sum over queries t and heads h of softmax_j(scale * q[t,h] . k[j]) for
// j <= q_pos[t]. acc: [max q_pos + 1]. A second pass over K: it never changes Attention's output.
void AccumulateAttentionWeights(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads,
                                int head_dim, float scale, const KvBlocks& kv, float* acc);

// ---- Sparse attention (attention_sparse.cc; docs/sparsity.md) ---------------------------
struct AttentionSparsity {
  // Value-fetch skipping: the V row of key j is not read when every head of its KV head group gives
  // j a softmax weight < skip_threshold (then all those weights are dropped; the softmax sum
  // keeps them). 0: every row is read.
  float skip_threshold = 0.f;
  // Progressive precision: scores first from kv.k_i8 with q quantized per head to INT8; a key's
  // f32 row is read and its scores recomputed when, for some head of its KV head group, the INT8 score
  // is >= that head's max INT8 score - progressive_margin. Needs kv.k_i8.
  bool progressive = false;
  float progressive_margin = 4.f;
  // Pruned heads: head_kv[h] is the KV head query head h reads (non-decreasing: heads of a
  // KV head group adjacent). null: h / (n_heads / n_kv_heads).
  const int32_t* head_kv = nullptr;
};
// Work counted by AttentionSparse (added to, never reset). Rows are per (query, KV head, key).
struct AttentionSparseCounts {
  int64_t v_rows = 0, v_rows_skipped = 0;  // V rows a dense pass reads / rows not read
  int64_t k_rows = 0, k_rows_f32 = 0;      // K rows scored / read in f32 (progressive: recomputed)
  void Add(const AttentionSparseCounts& o) {
    v_rows += o.v_rows;
    v_rows_skipped += o.v_rows_skipped;
    k_rows += o.k_rows;
    k_rows_f32 += o.k_rows_f32;
  }
};
// Attention as above with the exact softmax computed in passes (scores, then max and sum, then
// V), so each key's exact weight is known before its V row is read. Same shapes as Attention;
// n_kv_heads is the cache's (its row stride). Result (and counts) independent of n_q, batch
// and thread count. `counts` may be null.
void AttentionSparse(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
                     float scale, const KvBlocks& kv, const AttentionSparsity& sparsity, float* out,
                     AttentionSparseCounts* counts, ThreadPool* pool);

}  // namespace ferry::kernels
