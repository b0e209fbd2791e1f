// DeepSeek-V2's kv_b_proj in a Hugging Face folder -> the split tensors llama.cpp's converter
// writes for MLA (conversion/deepseek.py) and model/llama.cc reads.
#pragma once

#include <string>

#include "base/status.h"
#include "formats/loaded_source.h"

namespace ferry::formats {

// Replaces, per layer N, blk.N.attn_kv_b.weight (transformers' kv_b_proj, [heads (nope + v),
// kv_lora]: per head nope rows of W_UK then v rows of W_UV) with
//   blk.N.attn_k_b.weight [heads, kv_lora, nope]  (each head's W_UK transposed)
//   blk.N.attn_v_b.weight [heads, v, kv_lora]     (each head's W_UV)
// in the same element type (f32, f16 or bf16), owned by `src`. Shapes come from the metadata
// HfConfigToMetadata wrote; errors name the folder and the tensor.
Status SplitDeepseekKvB(const std::string& dir, LoadedWeightSource* src);

}  // namespace ferry::formats
