// AutoAWQ GEMM checkpoints in Hugging Face folders: each quantized linear "P" is stored as
//   P.qweight int32 [in, out/8]   P.qzeros int32 [in/G, out/8]   P.scales fp16 [in/G, out]
// with 8 nibbles per int32 in AutoAWQ's interleaved order (column 8c + kOrder[k] at bits 4k,
// kOrder = {0, 2, 4, 6, 1, 3, 5, 7}) and w = (q - z) * scale. This is exactly Ferry's int4
// (value = (q - z) * d, fp16 d, integer z, docs/formats.md 8.1), so the import is lossless:
// each triple becomes one Ferry int4_g{32,64,128} tensor "blk.N.<stem>.weight" [out, in].
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "formats/loaded_source.h"

namespace ferry::formats {

// AutoAWQ's nibble order within an int32 (slot k holds column 8c + kAwqOrder[k]).
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// Replaces the qweight/qzeros/scales triples of `src` (already loaded from `dir`) by Ferry int4
// tensors when quantization_config says {"quant_method": "awq", "bits": 4, "version": "gemm"}.
// Other quantization methods are an error naming the folder; no quantization_config: no-op.
Status ImportAwqTensors(const nlohmann::json& config, const std::string& dir, LoadedWeightSource* src);

}  // namespace ferry::formats
