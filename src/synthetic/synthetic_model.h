// Synthetic models: GGUF files with random weights and the real shapes of well-known models
// (plus a synthetic SentencePiece vocabulary), for tests and benchmarks without downloads.
// llama.cpp loads what this writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/dtype.h"

namespace ferry {

struct ModelPreset {
  std::string name;
  std::string arch;  // "llama", "qwen2" (q/k/v biases), "qwen3" (q/k norms), "qwen3moe", "granite",
                     // "smollm3", "olmo2" (post norms), "gemma2", "gemma3", "phi3" (fused qkv and gate_up),
                     // "gpt-oss" (sinks, biases, alternating sliding layers, YaRN, experts),
                     // "deepseek2" (multi-head latent attention, shared + routed experts)
  int32_t n_vocab, dim, n_layers, n_heads, n_kv_heads, ffn_dim, n_ctx;
  float rope_theta;
  bool tied_embeddings;
  // Mixture of experts (0 experts: dense). ffn_dim is then each expert's width; qwen2moe
  // presets add an always-on shared expert of shared_ffn_dim.
  int32_t n_expert = 0, n_expert_used = 0, shared_ffn_dim = 0;
  int32_t head_dim = 0;  // 0: dim / n_heads; else written as attention.key_length (qwen3: 128 at dim 1024)
  int32_t HeadDim() const { return head_dim > 0 ? head_dim : dim / n_heads; }
  // gemma: attention.sliding_window (0: key not written) and the soft-caps (0: not written).
  int32_t sliding_window = 0;
  float attn_softcap = 0.0f, final_softcap = 0.0f;
  // phi3: the dims of each head RoPE rotates (0: all; Phi-4-mini's partial_rotary_factor 0.75)
  // and LongRoPE's original context (0: none; else rope_factors_short/long.weight, the attention
  // factor sqrt(1 + ln(n_ctx / n_ctx_orig) / ln(n_ctx_orig)) and the original context are written).
  int32_t rot_dim = 0, n_ctx_orig = 0;
  int32_t RotDim() const { return rot_dim > 0 ? rot_dim : HeadDim(); }
  // gpt-oss: > 0 writes YaRN RoPE scaling (rope.scaling.type yarn, this factor, original context
  // n_ctx_orig) instead of LongRoPE's tensors.
  float yarn_factor = 0.0f;
  // deepseek2 (multi-head latent attention): the latent KV width, q's low rank (0: one attn_q),
  // a head's non-rotated query/key dims and value dims (rot_dim is the rotated part; head_dim
  // must be kv_lora_rank + rot_dim, n_kv_heads 1, as llama.cpp's converter writes); the first
  // n_dense_layers layers have a dense FFN of dense_ffn_dim, the others ffn_dim-wide experts
  // plus n_shared_experts always-on ones; router weights times expert_weights_scale; YaRN's
  // yarn_log_mul (0.1 mscale_all_dim, as the converter stores it).
  int32_t kv_lora_rank = 0, q_lora_rank = 0, mla_nope_dim = 0, mla_v_dim = 0;
  int32_t n_dense_layers = 0, n_shared_experts = 0, dense_ffn_dim = 0;
  float expert_weights_scale = 0.0f, yarn_log_mul = 0.0f;
};

// New architectures (docs/architectures.md): "qwen3-tiny", "qwen3moe-tiny", "granite-tiny", "smollm3-tiny",
// "olmo2-tiny", "gemma2-tiny", "gemma3-tiny", "phi3-tiny", "gpt-oss-tiny", "deepseek2-tiny" and the real
// shapes "qwen3-0.6b", "granite-3-2b", "smollm3-3b", "olmo2-1b", "gemma2-2b", "gemma3-1b", "phi4-mini",
// "gpt-oss-20b", "deepseek-v2-lite", "qwen3moe-30b-a3b". "tiny", "tiny-qwen2", "tiny-hd64" (head_dim 64),
// "smollm-135m", "tinyllama-1.1b", "smollm-draft" (smollm-135m's vocabulary); MoE: "moe-tiny" (8 experts,
// top-2), "qwen2moe-tiny" (8 experts, top-4, shared expert, unnormalized weights), "mixtral-mini" (Mixtral's
// proportions at 1/4 width: 8 experts top-2) and "mixtral-mini-dense" (its dense twin with the same total
// parameters: one FFN as wide as all 8 experts).
const std::vector<ModelPreset>& ModelPresets();

struct SyntheticModelOptions {
  std::string preset = "tiny";
  DType type = DType::kF16;      // weight matrices; norms stay f32. kI8 = W8A8 (docs/formats.md):
                                 // block linears int8 + f32 weight_scale, embeddings/head q8_0.
                                 // kMXFP4 = llama.cpp's MXFP4_MOE: the 3-D expert tensors MXFP4,
                                 // every other matrix q8_0 (MoE presets only)
  float w8a8_input_scale = 0.f;  // W8A8 only: > 0 writes this static input_scale per linear
  // With type kQ4_K: llama.cpp's Q4_K_M mix instead of Q4_K everywhere (MatrixTypeQ4_K_M).
  bool q4_k_m = false;
  uint64_t seed = 1234;
  float stddev = 0.02f;       // weights ~ N(0, stddev^2), norms = 1
  float bias_stddev = 0.02f;  // q/k/v biases of qwen2 presets ~ N(0, bias_stddev^2)
  // qwen3's per-head q/k norm weights ~ 1 + N(0, qk_norm_stddev^2): not all ones, so a forward
  // pass that normalizes but drops the weights differs.
  float qk_norm_stddev = 0.2f;
  int32_t threads = 0;  // 0 = physical cores
  bool show_progress = false;
};

// Types make-model can write.
std::vector<DType> SyntheticModelTypes();

Status WriteSyntheticModel(const std::string& path, const SyntheticModelOptions& options);

}  // namespace ferry
