// `ferry quantize ... --export autoawq DIR`: a Hugging Face folder in AutoAWQ's GEMM layout
// (formats/awq_import.h describes the packing) that vLLM and transformers load: config.json
// with quantization_config {quant_method "awq", bits 4, group_size, zero_point true, version
// "gemm", modules_to_not_convert} and model.safetensors. Linears whose shape AutoAWQ's GEMM
// layout cannot hold (n_in % group != 0 or n_out % 8 != 0) are listed in
// modules_to_not_convert and stored dense (f32) with their int4 values dequantized, so the
// folder computes what the Ferry file computes. q/k rows are put back into Hugging Face's
// rotate-half order when the source uses llama.cpp's interleaved RoPE order. Tokenizer files
// are not written (copy the model's own next to it).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "quant/float_model.h"
#include "quant/quant_writer.h"

namespace ferry::quant {

struct AutoAwqExportReport {
  int converted = 0;
  std::vector<std::string> not_converted;  // HF module names kept dense
};

// m: the (AWQ-scaled) model whose norms/embeddings are written; payloads: Ferry int4 linears.
StatusOr<AutoAwqExportReport> ExportAutoAwq(const std::string& dir, const FloatModel& m,
                                            const PayloadMap& payloads, int64_t group);

// HF row r of a q/k matrix with n_heads heads of head_dim rows -> the llama.cpp (GGUF) row.
int64_t GgufRowOfHfRow(int64_t r, int64_t head_dim);

}  // namespace ferry::quant
