// Group-wise asymmetric INT4 quantization of weight rows into Ferry's int4 format
// (core/dtype.h, docs/formats.md 8.1), with an optional per-group clip ratio for AWQ's clipping
// search. With no clipping the bytes equal kernels::ref::QuantizeRowInt4 (tested), so RTN and
// AWQ files differ only in the weights and ranges they were given.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace ferry::quant {

// Int4 type for a group size: 32 -> int4_g32, 64 -> int4_g64, 128 -> int4_g128.
DType Int4TypeForGroup(int64_t group);
inline int64_t NumGroups(int64_t n, int64_t group) {
  return (n + group - 1) / group;
}

// Quantizes x[n] into one Ferry int4 row at dst [FerryInt4RowBytes(group, n)]. clip: [ceil(n/G)]
// ratios c in (0, 1] (nullptr: all 1): the group's range [min, max] becomes
// [max(min, -c*amax), min(max, c*amax)] with amax = max |x| (AutoAWQ's clipping), then 0 is added.
void QuantizeRowInt4Clipped(const float* x, int64_t n, int64_t group, const float* clip, uint8_t* dst);
// y[n] = dequantize(quantize(x)) with the same clipping, without the bytes (search loops).
void FakeQuantRowInt4(const float* x, int64_t n, int64_t group, const float* clip, float* y);
// Whole matrix [n_out, n_in] -> int4 rows [n_out, FerryInt4RowBytes(group, n_in)].
// clip: [n_out, ceil(n_in/G)] or empty.
std::vector<uint8_t> QuantizeMatrixInt4(const std::vector<float>& w, int64_t n_out, int64_t n_in,
                                        int64_t group, const std::vector<float>& clip);

// Symmetric per-output-channel INT8 (the W8A8 contract): scale[o] = max|w[o,:]| / 127,
// q = round(w / scale) in [-127, 127]. w: [n_out, n_in] -> q: [n_out, n_in], scale: [n_out].
void QuantizeMatrixInt8PerChannel(const std::vector<float>& w, int64_t n_out, int64_t n_in,
                                  std::vector<int8_t>* q, std::vector<float>* scale);
// Per-token (per-row) symmetric INT8 fake quantization of activations in place: x [n_tok, n].
void FakeQuantActInt8PerToken(float* x, int64_t n_tok, int64_t n);
// Static per-tensor INT8 fake quantization with a given scale (max|x| / 127 from calibration).
void FakeQuantActInt8Static(float* x, int64_t count, float scale);

}  // namespace ferry::quant
