// Hugging Face -> llama.cpp (GGUF) tensor names for Llama/Mistral/Qwen2-style checkpoints.
#pragma once

#include <string>
#include <string_view>

namespace ferry::formats {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; names it does not know are
// returned unchanged (kept under their HF name).
std::string HfToGgufTensorName(std::string_view hf_name);

}  // namespace ferry::formats
