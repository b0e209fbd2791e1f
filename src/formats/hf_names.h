// Hugging Face -> llama.cpp (GGUF) tensor names for Llama/Mistral/Qwen2-style checkpoints.
#pragma once

#include <string>
#include <string_view>

namespace ferry::formats {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; names it does not know are
// returned unchanged (kept under their HF name). `arch` (Ferry's, e.g. "olmo2") decides the
// names that differ by architecture (post_attention_layernorm).
std::string HfToGgufTensorName(std::string_view hf_name, std::string_view arch = "llama");

}  // namespace ferry::formats
