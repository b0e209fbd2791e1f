#include "formats/hf_names.h"

#include <cctype>

namespace ferry::formats {
namespace {

struct Rename {
  std::string_view hf;
  std::string_view gguf;
};

// Per-layer suffixes after "model.layers.N.".
constexpr Rename kLayer[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // phi3: q|k|v rows in one tensor
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},      // phi3: gate|up rows (llama.cpp's ffn_up)
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // qwen3: per-head q/k norms
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},  // MoE router (qwen3moe)
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

// Architectures with post norms (olmo2, gemma2, gemma3) call the norm after attention what
// llama calls the FFN's pre norm: transformers' post_attention_layernorm is llama.cpp's
// post_attention_norm there, and gemma's FFN pre norm is pre_feedforward_layernorm.
constexpr Rename kPostNormLayer[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
};

// gpt-oss (transformers' GptOss*): the FFN's input norm is llama.cpp's post_attention_norm, the
// router has a bias, the sinks become a weight (conversion/gpt_oss.py). The fused experts are
// converted by formats/gpt_oss_experts.h.
constexpr Rename kGptOssLayer[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"mlp.router.weight", "ffn_gate_inp.weight"},
    {"mlp.router.bias", "ffn_gate_inp.bias"},
    {"self_attn.sinks", "attn_sinks.weight"},
};

// DeepSeek-V2 (modeling_deepseek.py): the low-rank q and KV projections and their norms, the
// shared experts (conversion/deepseek.py); kv_b_proj is split by formats/deepseek_mla.h.
constexpr Rename kDeepseek2Layer[] = {
    {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
    {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
    {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
    {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
};

constexpr Rename kGlobal[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

}  // namespace

bool HasPostNorms(std::string_view arch) {
  return arch == "olmo2" || arch == "gemma2" || arch == "gemma3";
}

std::string HfToGgufTensorName(std::string_view hf_name, std::string_view arch) {
  for (const Rename& r : kGlobal)
    if (hf_name == r.hf) return std::string(r.gguf);
  constexpr std::string_view kPrefix = "model.layers.";
  if (hf_name.substr(0, kPrefix.size()) != kPrefix) return std::string(hf_name);
  std::string_view rest = hf_name.substr(kPrefix.size());
  size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  if (digits == 0 || digits > 9 || digits >= rest.size() || rest[digits] != '.') return std::string(hf_name);
  std::string_view layer = rest.substr(0, digits);
  std::string_view suffix = rest.substr(digits + 1);
  if (arch == "gpt-oss")
    for (const Rename& r : kGptOssLayer)
      if (suffix == r.hf) return "blk." + std::string(layer) + "." + std::string(r.gguf);
  if (arch == "deepseek2")
    for (const Rename& r : kDeepseek2Layer)
      if (suffix == r.hf) return "blk." + std::string(layer) + "." + std::string(r.gguf);
  if (HasPostNorms(arch))
    for (const Rename& r : kPostNormLayer)
      if (suffix == r.hf) return "blk." + std::string(layer) + "." + std::string(r.gguf);
  for (const Rename& r : kLayer)
    if (suffix == r.hf) return "blk." + std::string(layer) + "." + std::string(r.gguf);
  // MoE experts, one tensor each: mlp.experts.E.{gate,up,down}_proj.weight -> ffn_{gate,up,down}.E.weight,
  // the per-expert names model/moe.cc reads (as older Mixtral GGUFs have them).
  constexpr std::string_view kExperts = "mlp.experts.";
  if (suffix.substr(0, kExperts.size()) == kExperts) {
    std::string_view e = suffix.substr(kExperts.size());
    size_t d = 0;
    while (d < e.size() && std::isdigit(static_cast<unsigned char>(e[d]))) ++d;
    if (d == 0 || d > 6 || d >= e.size() || e[d] != '.') return std::string(hf_name);
    const std::string_view expert = e.substr(0, d), proj = e.substr(d + 1);
    for (std::string_view which : {"gate", "up", "down"})
      if (proj == std::string(which) + "_proj.weight")
        return "blk." + std::string(layer) + ".ffn_" + std::string(which) + "." + std::string(expert) +
               ".weight";
  }
  return std::string(hf_name);
}

}  // namespace ferry::formats
