// Linear: one weight matrix of a model and how it is multiplied. Three storage kinds:
//  - in place: [n_out, n_in] rows of a GGUF type, dequantization fused into the dot products;
//  - packed: repacked once at load into the kernels' interleaved layout (q4_0, q8_0, int4);
//  - W8A8: int8 rows [n_out, n_in] with per-output-channel scales (`X.weight_scale`) and an
//    optional static activation scale (`X.input_scale`); docs/formats.md "W8A8 tensors".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"

namespace ferry {

struct Linear {
  const void* data = nullptr;  // [n_out, RowBytes(type, n_in)] in the weight file
  DType type = DType::kF32;
  int64_t n_out = 0, n_in = 0;
  size_t bytes = 0;                                      // bytes streamed per use
  std::shared_ptr<const AlignedBuffer> packed;           // [PackedBytes] or null (shared by copies)
  std::shared_ptr<const std::vector<float>> w8a8_scale;  // [n_out] when type is i8 (W8A8)
  float w8a8_input_scale = 0.f;                          // static activation scale; 0 = per token

  bool IsW8A8() const { return w8a8_scale != nullptr; }

  // Repacks when the kernels have a packed layout for the type and `repack` is set; types
  // with no other kernel are always packed.
  void MaybePack(bool repack, ThreadPool* pool);

  // y: [n_tok, n_out] = x: [n_tok, n_in] @ W^T
  void Apply(const float* x, int64_t n_tok, float* y, ThreadPool* pool) const;
};

// The rows of linears sharing one input stacked into one packed Linear (q|k|v, gate|up):
// one call then quantizes the activations once and splits rows over threads once. y rows come
// out as [n_tok, sum of n_out] in part order. Only when every part is packed with the same type
// and n_in (the packed kernel computes each row alone, so each output equals the unfused one
// bit for bit); the parts' own packed copies are released. Otherwise returns an empty Linear
// (n_out == 0) and leaves the parts as they are.
Linear StackRows(std::initializer_list<Linear*> parts, ThreadPool* pool);

// Loads `name` (e.g. "blk.0.attn_q.weight") as a [n_out, n_in] Linear, checking shape, type
// and byte size. An i8 weight must come with `<name>_scale` (f32-convertible [n_out]) and may
// have `<stem>.input_scale` ([1], > 0). Every error names the file and the tensor.
StatusOr<Linear> LoadLinear(const formats::WeightSource& src, const std::string& name, int64_t n_out,
                            int64_t n_in);

// Loads a 3-D tensor `name` of shape [n_mats, n_out, n_in] (deepseek2's per-head attn_k_b /
// attn_v_b) as n_mats [n_out, n_in] Linears viewing its bytes. Not for W8A8 (int8) tensors.
StatusOr<std::vector<Linear>> LoadLinearStack(const formats::WeightSource& src, const std::string& name,
                                              int64_t n_mats, int64_t n_out, int64_t n_in);

}  // namespace ferry
