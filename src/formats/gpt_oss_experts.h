// gpt-oss's fused expert tensors in a Hugging Face folder -> the per-projection 3-D tensors
// llama.cpp's converter writes (conversion/gpt_oss.py) and model/moe.cc reads.
#pragma once

#include <string>

#include "base/status.h"
#include "formats/loaded_source.h"

namespace ferry::formats {

// Replaces, per layer N, transformers' GptOssExperts parameters (still under their HF names,
// "model.layers.N.mlp.experts.*") with llama.cpp's:
//   gate_up_proj [E, dim, 2F] (gate = even columns, up = odd), f32/f16/bf16
//       -> blk.N.ffn_gate_exps.weight, blk.N.ffn_up_exps.weight [E, F, dim] (transposed, same type)
//   down_proj [E, F, dim] -> blk.N.ffn_down_exps.weight [E, dim, F]
//   gate_up_proj_bias [E, 2F] -> blk.N.ffn_{gate,up}_exps.bias [E, F]; down_proj_bias -> .bias [E, dim]
//   *_blocks [E, rows, cols/32, 16] u8 + *_scales [E, rows, cols/32] u8 (openai's MXFP4 checkpoints)
//       -> MXFP4 [E, rows, cols] in ggml's block layout (scale byte first; element j in the low
//          nibble of byte j, element j + 16 in its high nibble, where the checkpoint packs
//          elements 2i and 2i + 1 into byte i), gate/up rows de-interleaved as above.
// The results are owned by `src`; errors name the folder, the tensor and what was expected.
Status ImportGptOssExperts(const std::string& dir, LoadedWeightSource* src);

}  // namespace ferry::formats
