// Writes a transformed FloatModel as a GGUF file Ferry loads and mmaps directly: each linear
// as the payload its method produced (Ferry int4, W8A8 I8 + scales, or f32), norms as f32,
// embeddings and the output head copied byte for byte from the source, and the recipe in
// "ferry.quant.*" metadata (docs/quantization.md lists the keys).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/dtype.h"
#include "formats/weight_source.h"
#include "quant/float_model.h"

namespace ferry::quant {

// One linear's stored form. type kF32: bytes empty, the FloatModel's weights are written.
// type kI8 (W8A8 contract, docs/formats.md): bytes = int8 [n_out, n_in], weight_scale [n_out],
// input_scale set for static per-tensor activation scaling. Ferry int4: bytes = int4 rows.
struct LinearPayload {
  DType type = DType::kF32;
  std::vector<uint8_t> bytes;
  std::vector<float> weight_scale;   // [n_out], I8 only
  std::optional<float> input_scale;  // I8 only
};

// Keyed by (layer, kind); linears without an entry are written as f32 from the FloatModel.
using PayloadMap = std::map<std::pair<int32_t, LinearKind>, LinearPayload>;

// Recorded as metadata: ferry.quant.{method, scheme, bits, group_size, alpha, calibration}
// (empty strings / negative numbers are omitted). `extra` adds further string keys.
struct QuantRecipe {
  std::string method;  // "rtn", "awq", "smoothquant", "magnitude", "wanda"
  std::string scheme;  // "w4a16", "w8a8", "sparse"
  int32_t bits = -1;
  int64_t group_size = -1;
  double alpha = -1;
  std::string calibration;  // "FILE (N windows of L tokens)"
  std::vector<std::pair<std::string, std::string>> extra;
  int32_t file_type = -1;  // general.file_type to write (Ferry's type id for int4); < 0: keep the source's
};

Status WriteQuantizedGguf(const std::string& path, const formats::WeightSource& source,
                          const FloatModel& model, const PayloadMap& payloads, const QuantRecipe& recipe);

}  // namespace ferry::quant
