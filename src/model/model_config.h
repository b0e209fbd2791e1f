// ModelConfig: the hyperparameters of a decoder-only transformer, read from GGUF-convention
// metadata (whatever file format it came from) and validated before any weight is touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"

namespace ferry {

struct ModelConfig {
  std::string arch;  // "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "granite", "smollm3", "olmo2",
                     // "gemma2", "gemma3", "phi3", "gpt-oss", "deepseek2"
  std::string name;  // general.name, for display
  int32_t n_vocab = 0;
  int32_t dim = 0;  // embedding width
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;  // < n_heads: grouped-query attention
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t n_ctx_train = 0;  // context length the model was trained for
  int32_t rot_dim = 0;      // dims of each head that RoPE rotates
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions are multiplied by this
  bool rope_neox = false;        // rotate-half pairs (j, j+rot/2) instead of (2j, 2j+1)
  // llama.cpp's rope.scaling.attn_factor (Phi-3's LongRoPE): the rotated dims of q and k are
  // multiplied by it (cos and sin scaled), the rest of each head is left as it is.
  float rope_attn_factor = 1.0f;
  // Phi-3 LongRoPE: contexts longer than this ("{arch}.rope.scaling.original_context_length",
  // default n_ctx_train) divide the RoPE frequencies by rope_factors_long.weight, others by
  // rope_factors_short.weight (llama.cpp get_rope_factors, chosen by the context size). 0: unset.
  int32_t n_ctx_orig = 0;
  // YaRN ("{arch}.rope.scaling.type" = yarn, gpt-oss): pair j's angle mixes the interpolated
  // pos * freq_scale * base^(-2j/rot) and the original pos * base^(-2j/rot) by llama.cpp's ramp
  // over the correction dims of beta_fast / beta_slow at n_ctx_orig; rope_attn_factor then holds
  // YaRN's magnitude scale (1 + 0.1 ln(factor), times the file's attn_factor).
  bool rope_yarn = false;
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
  bool UsesLongRopeFactors(int32_t context) const { return n_ctx_orig > 0 && context > n_ctx_orig; }
  // Layers whose q/k get no RoPE at all (SmolLM3's NoPE layers); [n_layers], empty: RoPE everywhere.
  std::vector<uint8_t> nope_layers;
  bool UsesRope(int32_t layer) const {
    return nope_layers.empty() || !nope_layers[static_cast<size_t>(layer)];
  }
  // qwen3: RMSNorm (attn_q_norm / attn_k_norm, [head_dim]) on each head of q and k before RoPE.
  bool qk_norm = false;
  // olmo2: q and k RMS-normalized over the whole projection (attn_q_norm [n_heads head_dim],
  // attn_k_norm [n_kv_heads head_dim]) before RoPE, instead of per head.
  bool qk_norm_whole = false;
  // olmo2: no norm before attention or FFN (no attn_norm / ffn_norm); each block's output goes
  // through its post norm (post_attention_norm / post_ffw_norm) before the residual add.
  bool pre_norms = true;
  bool post_norms = false;  // olmo2, gemma2, gemma3 (gemma: both pre and post norms)

  // Gemma: sliding-window layers (swa_layers [n_layers], 1 = the layer attends only the last
  // sliding_window positions), which rotate with their own RoPE base and scale.
  int32_t sliding_window = 0;
  std::vector<uint8_t> swa_layers;
  bool HasSlidingLayers() const { return sliding_window > 0 && !swa_layers.empty(); }
  bool IsSlidingLayer(int32_t layer) const {
    return HasSlidingLayers() && swa_layers[static_cast<size_t>(layer)];
  }
  float rope_theta_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;
  // Gemma 2's soft-capping, cap * tanh(x / cap) (0 = none): of attention scores, of the logits.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  bool gelu_ffn = false;  // gemma: GeGLU, gelu_tanh(gate) * up, instead of SwiGLU
  // gpt-oss: the experts' clamped SwiGLU, min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1)
  // (llama.cpp's ggml_swiglu_oai); learned attention sinks (blk.L.attn_sinks.weight, [n_heads]);
  // the FFN's input norm is named post_attention_norm.
  bool swiglu_oai = false;
  bool attn_sinks = false;
  // phi3: ffn_up.weight holds gate and up stacked ([2 ffn_dim, dim], gate rows first); q/k/v
  // may come stacked as attn_qkv.weight ([q_dim + 2 kv_dim, dim]) whatever the architecture.
  bool fused_gate_up = false;
  // Granite's multipliers (llama.cpp's f_*_scale; 0 = absent): the embeddings are multiplied by
  // embedding_scale, attention scores by attention_scale (instead of 1/sqrt(head_dim)), each
  // block's output by residual_scale before its residual add, and the logits divided by logit_scale.
  float embedding_scale = 0.0f;
  float attention_scale = 0.0f;
  float residual_scale = 0.0f;
  float logit_scale = 0.0f;
  float AttentionScale() const;  // what q.k is multiplied by before the softmax

  // Mixture of experts ("{arch}.expert_count" > 0): every layer's FFN is n_expert experts of
  // expert_ffn_dim, n_expert_used chosen per token by a softmax router (model/moe.h).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t expert_ffn_dim = 0;         // "{arch}.expert_feed_forward_length" (llama: feed_forward_length)
  int32_t shared_expert_ffn_dim = 0;  // qwen2moe's always-on shared expert; 0: none
  bool expert_weights_norm = true;    // renormalize the top-k weights to sum 1 (Mixtral yes, Qwen2-MoE no)
  // gpt-oss (llama.cpp's SOFTMAX_WEIGHT gating): the top k of the raw router logits, their
  // weights a softmax over those k logits alone.
  bool expert_softmax_after_topk = false;
  bool IsMoe() const { return n_expert > 0; }
  // deepseek2: the first n_dense_layers layers have a dense FFN of ffn_dim, the rest experts;
  // the router's top-k weights are multiplied by expert_weights_scale (0 or 1: unscaled).
  int32_t n_dense_layers = 0;
  float expert_weights_scale = 0.0f;
  bool IsMoeLayer(int32_t layer) const { return IsMoe() && layer >= n_dense_layers; }

  // deepseek2's multi-head latent attention (MLA, kv_lora_rank > 0), run absorbed as llama.cpp
  // runs MLA GGUFs: each token caches one latent row [kv_lora_rank | rot_dim] (the normalized
  // compressed KV, then the shared RoPE'd key part), so the cache holds n_kv_heads = 1 head of
  // head_dim = kv_lora_rank + rot_dim values, and V is its first kv_lora_rank values. Query head h
  // attends with [W_UK[h]^T q_nope[h] | rope(q_pe[h])]; its output goes through W_UV[h] to
  // mla_v_dim values before W_o. attention_scale holds YaRN's mscale^2 / sqrt(mla_k_dim).
  int32_t kv_lora_rank = 0;
  int32_t q_lora_rank = 0;  // > 0: q = W_qb(norm(W_qa x)); 0: one attn_q (DeepSeek-V2-Lite)
  int32_t mla_k_dim = 0;    // qk_nope + rot_dim: a query head's dims before absorption ("key_length_mla")
  int32_t mla_v_dim = 0;    // a head's value dims after W_UV ("value_length_mla")
  bool IsMla() const { return kv_lora_rank > 0; }
  int32_t MlaNopeDim() const { return mla_k_dim - rot_dim; }

  // Reads "{arch}.*" keys; n_vocab from "{arch}.vocab_size" or the token list length.
  static StatusOr<ModelConfig> FromMetadata(const Metadata& md);
  // Checks ranges and divisibility (heads divide dim, kv heads divide heads, ...).
  Status Validate() const;
};

}  // namespace ferry
