#include "model/model_config.h"

#include <cmath>

namespace ferry {
namespace {

// qwen2moe's router weights are used as the softmax gives them; Mixtral and qwen3moe
// renormalize the top k (llama.cpp hard-codes both; the key, when present, decides).
bool DefaultExpertWeightsNorm(const std::string& arch) {
  return arch != "qwen2moe" && arch != "gpt-oss" && arch != "deepseek2";
}

// llama.cpp's keys: "{arch}.expert_count", "expert_used_count", "expert_feed_forward_length",
// "expert_shared_feed_forward_length", "expert_weights_norm". Mixtral GGUFs (arch llama) give
// the expert width as feed_forward_length; llama.cpp normalizes the top-k weights for llama
// and not for qwen2moe unless expert_weights_norm says so.
Status ReadMoeConfig(const Metadata& md, const std::string& p, ModelConfig* c) {
  const int64_t n_expert = md.GetInt(p + "expert_count").value_or(0);
  if (n_expert == 0) {
    if (c->arch == "qwen2moe" || c->arch == "qwen3moe")
      return InvalidArgumentError("metadata key '{}expert_count' is missing", p);
    return Status::Ok();
  }
  const int64_t used = md.GetInt(p + "expert_used_count").value_or(0);
  if (n_expert < 0 || n_expert > 4096 || used <= 0 || used > n_expert)
    return InvalidArgumentError(
        "'{}expert_count' = {} and '{}expert_used_count' = {} must satisfy 1 <= used <= count <= 4096", p,
        n_expert, p, used);
  const int64_t ffn = md.GetInt(p + "expert_feed_forward_length").value_or(c->ffn_dim);
  const int64_t shared = md.GetInt(p + "expert_shared_feed_forward_length").value_or(0);
  if (ffn <= 0 || ffn > (1 << 30) || shared < 0 || shared > (1 << 30))
    return InvalidArgumentError(
        "'{}expert_feed_forward_length' = {} / '{}expert_shared_feed_forward_length' = {} out of range", p,
        ffn, p, shared);
  c->n_expert = static_cast<int32_t>(n_expert);
  c->n_expert_used = static_cast<int32_t>(used);
  c->expert_ffn_dim = static_cast<int32_t>(ffn);
  c->shared_expert_ffn_dim = static_cast<int32_t>(shared);
  c->expert_weights_norm = md.GetBool(p + "expert_weights_norm").value_or(DefaultExpertWeightsNorm(c->arch));
  if (c->arch == "gpt-oss") c->expert_weights_norm = false;  // llama.cpp passes norm_w = false
  c->expert_softmax_after_topk = c->arch == "gpt-oss";
  return Status::Ok();
}

// llama.cpp set_swa_pattern: layer l slides unless l % period == period - 1 (period 0: all
// slide), or a per-layer array of flags.
Status ReadSwaPattern(const Metadata& md, const std::string& key, int64_t default_period, ModelConfig* c) {
  if (auto flags = md.GetIntArray(key)) {
    if (flags->size() != static_cast<size_t>(c->n_layers))
      return InvalidArgumentError("'{}' has {} entries for {} layers", key, flags->size(), c->n_layers);
    for (int64_t f : *flags) c->swa_layers.push_back(f != 0 ? 1 : 0);
    return Status::Ok();
  }
  const int64_t period = md.GetInt(key).value_or(default_period);
  if (period < 0 || period > (1 << 20)) return InvalidArgumentError("'{}' = {} is out of range", key, period);
  for (int64_t l = 0; l < c->n_layers; ++l)
    c->swa_layers.push_back(period == 0 || l % period < period - 1 ? 1 : 0);
  return Status::Ok();
}

// gpt-oss as llama.cpp's src/models/openai-moe.cpp reads it: a required sliding window, every
// other layer sliding (layer 0 first), both kinds with the global RoPE base and scale (YaRN)
// unless rope.freq_base_swa says otherwise; sinks, biases, clamped SwiGLU experts.
Status ReadGptOss(const Metadata& md, const std::string& p, ModelConfig* c) {
  if (c->arch != "gpt-oss") return Status::Ok();
  const auto window = md.GetInt(p + "attention.sliding_window");
  if (!window) return InvalidArgumentError("metadata key '{}attention.sliding_window' is missing", p);
  if (*window <= 0 || *window > (1 << 30))
    return InvalidArgumentError("'{}attention.sliding_window' = {} is out of range", p, *window);
  c->sliding_window = static_cast<int32_t>(*window);
  FERRY_RETURN_IF_ERROR(ReadSwaPattern(md, p + "attention.sliding_window_pattern", 2, c));
  c->rope_theta_swa = static_cast<float>(md.GetFloat(p + "rope.freq_base_swa").value_or(c->rope_theta));
  c->rope_freq_scale_swa = c->rope_freq_scale;
  c->rope_neox = true;
  c->swiglu_oai = true;
  c->attn_sinks = true;
  if (!c->IsMoe()) return InvalidArgumentError("metadata key '{}expert_count' is missing", p);
  return Status::Ok();
}

// Which layers skip RoPE. SmolLM3 GGUFs carry no list: llama.cpp hard-codes every 4th layer
// (n_no_rope_layer_step = 4: layers 3, 7, 11, ...). Hugging Face folders state theirs
// ("no_rope_layers"), converted to "ferry.rope.nope_layers" ([n_layers], 1 = no RoPE).
// Granite without rope_finetuned runs no RoPE anywhere (llama.cpp's switch).
Status ReadNopeLayers(const Metadata& md, const std::string& p, ModelConfig* c) {
  const size_t n = static_cast<size_t>(c->n_layers);
  if (auto list = md.GetIntArray("ferry.rope.nope_layers")) {
    if (list->size() != n)
      return InvalidArgumentError("'ferry.rope.nope_layers' has {} entries for {} layers", list->size(), n);
    for (int64_t v : *list) c->nope_layers.push_back(v != 0 ? 1 : 0);
  } else if (c->arch == "smollm3") {
    for (size_t l = 0; l < n; ++l) c->nope_layers.push_back((l + 1) % 4 == 0 ? 1 : 0);
  } else if (c->arch == "granite" && !md.GetBool(p + "rope.scaling.finetuned").value_or(true)) {
    c->nope_layers.assign(n, 1);
  }
  return Status::Ok();
}

// Granite's multipliers; llama.cpp requires logit_scale and defaults the rest to 0 (unused).
Status ReadGraniteScales(const Metadata& md, const std::string& p, ModelConfig* c) {
  if (c->arch != "granite") return Status::Ok();
  auto logit = md.GetFloat(p + "logit_scale");
  if (!logit) return InvalidArgumentError("metadata key '{}logit_scale' is missing", p);
  c->logit_scale = static_cast<float>(*logit);
  c->embedding_scale = static_cast<float>(md.GetFloat(p + "embedding_scale").value_or(0.0));
  c->attention_scale = static_cast<float>(md.GetFloat(p + "attention.scale").value_or(0.0));
  c->residual_scale = static_cast<float>(md.GetFloat(p + "residual_scale").value_or(0.0));
  if (!(c->logit_scale != 0.0f) || !std::isfinite(c->logit_scale) || !std::isfinite(c->embedding_scale) ||
      !std::isfinite(c->attention_scale) || !std::isfinite(c->residual_scale))
    return InvalidArgumentError("'{}logit_scale' must be finite and nonzero, the other scales finite", p);
  return Status::Ok();
}

// Gemma 2/3 as llama.cpp's src/models/gemma{2,3}.cpp read them. The norm weights in their GGUFs
// already hold gemma's 1 + w (the converter adds the 1), so the norms are plain RMSNorm.
Status ReadGemma(const Metadata& md, const std::string& p, ModelConfig* c) {
  const bool g2 = c->arch == "gemma2";
  if (!g2 && c->arch != "gemma3") return Status::Ok();
  c->post_norms = true;
  c->gelu_ffn = true;
  c->rope_neox = true;
  c->qk_norm = !g2;  // gemma3: per-head q/k norms
  c->embedding_scale = std::sqrt(static_cast<float>(c->dim));
  // gemma_pytorch: the 27B sizes (46 / 62 layers) scale by 1/sqrt(dim / heads), the others by
  // 1/sqrt(head_dim). A Hugging Face folder states query_pre_attn_scalar instead.
  const bool big = c->n_layers == (g2 ? 46 : 62);
  c->attention_scale = 1.0f / std::sqrt(static_cast<float>(big ? c->dim / c->n_heads : c->head_dim));
  if (auto s = md.GetFloat("ferry.attention.scale")) c->attention_scale = static_cast<float>(*s);
  const auto window = md.GetInt(p + "attention.sliding_window");
  c->sliding_window = static_cast<int32_t>(window.value_or(g2 ? 4096 : 0));
  if (c->sliding_window < 0 || c->sliding_window > (1 << 30))
    return InvalidArgumentError("'{}attention.sliding_window' = {} is out of range", p, c->sliding_window);
  if (c->sliding_window > 0)
    FERRY_RETURN_IF_ERROR(ReadSwaPattern(md, p + "attention.sliding_window_pattern", g2 ? 2 : 6, c));
  // Sliding layers' RoPE: gemma2 the global base and scale, gemma3 base 10000 and no scaling
  // unless the file says rope.freq_base_swa.
  c->rope_theta_swa = g2 ? c->rope_theta : 10000.0f;
  c->rope_freq_scale_swa = g2 ? c->rope_freq_scale : 1.0f;
  c->rope_theta_swa = static_cast<float>(md.GetFloat(p + "rope.freq_base_swa").value_or(c->rope_theta_swa));
  c->attn_softcap = g2 ? static_cast<float>(md.GetFloat(p + "attn_logit_softcapping").value_or(50.0)) : 0.0f;
  c->final_softcap = static_cast<float>(md.GetFloat(p + "final_logit_softcapping").value_or(g2 ? 30.0 : 0.0));
  if (!(c->attn_softcap >= 0.0f) || !(c->final_softcap >= 0.0f) || !(c->rope_theta_swa > 0.0f))
    return InvalidArgumentError("'{}' soft-capping values must be >= 0 and rope.freq_base_swa positive", p);
  return Status::Ok();
}

// YaRN's RoPE magnitude in llama.cpp's float steps (llama-context.cpp yarn_attn_factor, then
// ggml's rope_yarn): ratio / (1 + 0.1 ln f) times the file's attn_factor, times 1 + 0.1 ln(1 /
// freq_scale). ratio is mscale(f, 1) = 1 + 0.1 ln f, or deepseek2's mscale(f, m_all) / itself = 1.
float YarnRopeMagnitude(float ratio, float file_attn_factor, float freq_scale) {
  const float factor = 1.0f / freq_scale;
  const float attn = ratio * (1.0f / (1.0f + 0.1f * std::log(factor))) * file_attn_factor;
  return attn * (1.0f + 0.1f * std::log(1.0f / freq_scale));
}
float YarnMscale(float factor, float m) {
  return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f;
}

// deepseek2 as llama.cpp's src/models/deepseek2.cpp reads an MLA GGUF (the converter's split
// attn_k_b / attn_v_b): the cache's one "head" is the latent row, attention.key_length =
// kv_lora_rank + rope dims and value_length = kv_lora_rank; key/value_length_mla are a head's
// real sizes. Leading dense layers, shared experts (expert_shared_count of the expert width,
// ungated), scaled router weights, and YaRN's mscale folded into the score scale.
Status ReadDeepseek2(const Metadata& md, const std::string& p, ModelConfig* c) {
  if (c->arch != "deepseek2") return Status::Ok();
  auto int_key = [&](const std::string& key, bool required, int64_t fallback, int32_t* out) -> Status {
    auto v = md.GetInt(p + key);
    if (!v && required) return InvalidArgumentError("metadata key '{}{}' is missing", p, key);
    const int64_t x = v.value_or(fallback);
    if (x < 0 || x > (1 << 20)) return InvalidArgumentError("'{}{}' = {} is out of range", p, key, x);
    *out = static_cast<int32_t>(x);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(int_key("attention.kv_lora_rank", true, 0, &c->kv_lora_rank));
  FERRY_RETURN_IF_ERROR(int_key("attention.q_lora_rank", false, 0, &c->q_lora_rank));
  FERRY_RETURN_IF_ERROR(int_key("leading_dense_block_count", false, 0, &c->n_dense_layers));
  if (!md.GetInt(p + "attention.key_length_mla") || !md.GetInt(p + "attention.value_length_mla"))
    return UnsupportedError(
        "'{}attention.key_length_mla' / 'value_length_mla' are missing: a DeepSeek GGUF with the unsplit "
        "attn_kv_b tensor (converted before llama.cpp's MLA support) is not supported; convert it again with "
        "a current convert_hf_to_gguf.py",
        p);
  FERRY_RETURN_IF_ERROR(int_key("attention.key_length_mla", true, 0, &c->mla_k_dim));
  FERRY_RETURN_IF_ERROR(int_key("attention.value_length_mla", true, 0, &c->mla_v_dim));
  if (c->kv_lora_rank == 0 || c->mla_v_dim == 0 || c->mla_k_dim <= c->rot_dim)
    return InvalidArgumentError(
        "'{}attention.kv_lora_rank' ({}), 'value_length_mla' ({}) must be positive and 'key_length_mla' ({}) "
        "larger than 'rope.dimension_count' ({})",
        p, c->kv_lora_rank, c->mla_v_dim, c->mla_k_dim, c->rot_dim);
  if (c->n_kv_heads != 1 || c->head_dim != c->kv_lora_rank + c->rot_dim)
    return InvalidArgumentError(
        "'{}attention.head_count_kv' = {} and 'attention.key_length' = {}: an MLA GGUF caches one latent "
        "head of kv_lora_rank + rope dims ({}); convert it again with a current convert_hf_to_gguf.py",
        p, c->n_kv_heads, c->head_dim, c->kv_lora_rank + c->rot_dim);
  if (c->n_dense_layers > c->n_layers)
    return InvalidArgumentError("'{}leading_dense_block_count' = {} exceeds the {} layers", p,
                                c->n_dense_layers, c->n_layers);
  if (c->n_dense_layers < c->n_layers) {
    if (!c->IsMoe()) return InvalidArgumentError("metadata key '{}expert_count' is missing", p);
    int32_t n_shared = 0;
    FERRY_RETURN_IF_ERROR(int_key("expert_shared_count", false, 0, &n_shared));
    c->shared_expert_ffn_dim = n_shared * c->expert_ffn_dim;
  }
  c->expert_weights_scale = static_cast<float>(md.GetFloat(p + "expert_weights_scale").value_or(0.0));
  if (!std::isfinite(c->expert_weights_scale) || c->expert_weights_scale < 0)
    return InvalidArgumentError("'{}expert_weights_scale' = {} must be finite and >= 0", p,
                                c->expert_weights_scale);
  // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE: 1 softmax (DeepSeek-V2, the default), 2 sigmoid (V3).
  const int64_t gating = md.GetInt(p + "expert_gating_func").value_or(1);
  if (gating != 1)
    return UnsupportedError(
        "'{}expert_gating_func' = {}: only softmax routing (1, DeepSeek-V2) is supported; sigmoid routing "
        "with "
        "selection biases (2, DeepSeek-V3) is not yet",
        p, gating);
  if (md.GetInt(p + "expert_group_count").value_or(0) > 1)
    return UnsupportedError("'{}expert_group_count' > 1 (grouped expert routing) is not supported yet", p);
  if (md.GetFloat(p + "attention.temperature_scale").value_or(0.0) != 0.0)
    return UnsupportedError(
        "'{}attention.temperature_scale' (attention temperature tuning) is not supported yet", p);
  // llama.cpp (llama-context.cpp, deepseek2.cpp, TAG_DEEPSEEK2_YARN_LOG_MUL_FIX): the file's
  // yarn_log_multiplier is 0.1 mscale_all_dim; the RoPE magnitude is mscale(f, m) / mscale(f,
  // m_all) (m = m_all for deepseek2, so 1) over 1 + 0.1 ln f, times the file's attn_factor, then
  // ggml's 1 + 0.1 ln f; the scores are scaled by (that (1 + 0.1 m_all ln f))^2 / sqrt(mla_k_dim).
  // The same float steps here.
  const float log_mul =
      static_cast<float>(md.GetFloat(p + "rope.scaling.yarn_log_multiplier").value_or(0.0)) / 0.1f;
  float rope_mag = static_cast<float>(md.GetFloat(p + "rope.scaling.attn_factor").value_or(1.0));
  float mscale = rope_mag;
  if (c->rope_yarn && c->rope_freq_scale != 1.0f) {
    const float ratio = log_mul != 0.0f ? 1.0f : YarnMscale(1.0f / c->rope_freq_scale, 1.0f);
    rope_mag = YarnRopeMagnitude(ratio, rope_mag, c->rope_freq_scale);
    mscale = rope_mag * (1.0f + 0.1f * log_mul * std::log(1.0f / c->rope_freq_scale));
  }
  c->rope_attn_factor = rope_mag;
  c->attention_scale = 1.0f * mscale * mscale / std::sqrt(static_cast<float>(c->mla_k_dim));
  return Status::Ok();
}

}  // namespace

float ModelConfig::AttentionScale() const {
  return attention_scale != 0.0f ? attention_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

Status CheckArchitecture(const std::string& arch) {
  for (const char* known : {"llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "granite", "smollm3", "olmo2",
                            "gemma2", "gemma3", "phi3", "gpt-oss", "deepseek2"})
    if (arch == known) return Status::Ok();
  return UnsupportedError(
      "architecture '{}' is not supported (supported: llama, qwen2, qwen2moe, qwen3, qwen3moe, granite, "
      "smollm3, olmo2, gemma2, gemma3, phi3, gpt-oss, deepseek2)",
      arch);
}

StatusOr<ModelConfig> ModelConfig::FromMetadata(const Metadata& md) {
  ModelConfig c;
  auto arch = md.GetString("general.architecture");
  if (!arch) return InvalidArgumentError("metadata has no 'general.architecture' string");
  c.arch = *arch;
  c.name = md.GetString("general.name").value_or(c.arch);
  const std::string p = c.arch + ".";
  // Before the architecture's own keys: an unknown one is named as such, not as a missing key.
  FERRY_RETURN_IF_ERROR(CheckArchitecture(c.arch));
  auto req_int = [&](const std::string& key, int32_t* out) -> Status {
    auto v = md.GetInt(p + key);
    if (!v) return InvalidArgumentError("metadata key '{}{}' is missing or not an integer", p, key);
    if (*v <= 0 || *v > (1 << 30))
      return InvalidArgumentError("metadata key '{}{}' = {} is out of range", p, key, *v);
    *out = static_cast<int32_t>(*v);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(req_int("embedding_length", &c.dim));
  FERRY_RETURN_IF_ERROR(req_int("block_count", &c.n_layers));
  FERRY_RETURN_IF_ERROR(req_int("feed_forward_length", &c.ffn_dim));
  FERRY_RETURN_IF_ERROR(req_int("attention.head_count", &c.n_heads));
  c.n_kv_heads = static_cast<int32_t>(md.GetInt(p + "attention.head_count_kv").value_or(c.n_heads));
  c.n_ctx_train = static_cast<int32_t>(md.GetInt(p + "context_length").value_or(2048));
  c.head_dim = static_cast<int32_t>(md.GetInt(p + "attention.key_length").value_or(c.dim / c.n_heads));
  c.rot_dim = static_cast<int32_t>(md.GetInt(p + "rope.dimension_count").value_or(c.head_dim));
  c.rms_eps = static_cast<float>(md.GetFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_theta = static_cast<float>(md.GetFloat(p + "rope.freq_base").value_or(10000.0));
  const std::string scaling = md.GetString(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    double factor = md.GetFloat(p + "rope.scaling.factor").value_or(1.0);
    if (factor > 0) c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling == "yarn") {
    double factor = md.GetFloat(p + "rope.scaling.factor").value_or(1.0);
    if (factor > 0) c.rope_freq_scale = static_cast<float>(1.0 / factor);
    c.rope_yarn = true;
  } else if (scaling != "none") {
    // Never run a model with positions encoded differently from how it was trained.
    return UnsupportedError(
        "rope scaling type '{}' ('{}rope.scaling.type') is not supported yet (none, linear, yarn)", scaling,
        p);
  }
  // llama.cpp: llama uses "normal" (interleaved) rope, qwen2 neox. HF folders keep q/k in
  // rotate-half order, which is neox style whatever the architecture.
  const bool qwen = c.arch == "qwen2" || c.arch == "qwen2moe" || c.arch == "qwen3" || c.arch == "qwen3moe";
  c.rope_neox = qwen || c.arch == "olmo2" || c.arch == "phi3" || c.arch == "gpt-oss" ||
                md.GetBool("ferry.rope.neox").value_or(false);
  c.rope_attn_factor = static_cast<float>(md.GetFloat(p + "rope.scaling.attn_factor").value_or(1.0));
  if (c.rope_yarn && c.rope_freq_scale != 1.0f) {
    // llama.cpp: attn_factor = mscale(factor) / (1 + 0.1 ln factor) times the file's, then ggml's
    // 1 + 0.1 ln(1 / freq_scale) (deepseek2 replaces it: ReadDeepseek2).
    c.rope_attn_factor =
        YarnRopeMagnitude(YarnMscale(1.0f / c.rope_freq_scale, 1.0f), c.rope_attn_factor, c.rope_freq_scale);
  }
  c.n_ctx_orig =
      static_cast<int32_t>(md.GetInt(p + "rope.scaling.original_context_length").value_or(c.n_ctx_train));
  // phi3 (llama.cpp src/models/phi3.cpp): gate|up in one ffn_up tensor. Its sliding window
  // (Phi-3's "attention.sliding_window") is ignored, as llama.cpp does ("Phi SWA is currently
  // disabled"), so the two agree; Phi-4 GGUFs write 0 there.
  c.fused_gate_up = c.arch == "phi3";
  c.qk_norm = c.arch == "qwen3" || c.arch == "qwen3moe";
  c.qk_norm_whole = c.arch == "olmo2";
  c.pre_norms = c.arch != "olmo2";
  c.post_norms = c.arch == "olmo2";
  // OLMo 3 GGUFs (arch olmo2) add sliding-window layers, which this forward pass does not run.
  if (c.arch == "olmo2" && md.GetInt(p + "attention.sliding_window").value_or(0) > 0)
    return UnsupportedError(
        "'{}attention.sliding_window' is set: olmo2 with sliding-window layers (OLMo 3) "
        "is not supported yet",
        p);
  FERRY_RETURN_IF_ERROR(ReadMoeConfig(md, p, &c));
  FERRY_RETURN_IF_ERROR(ReadNopeLayers(md, p, &c));
  FERRY_RETURN_IF_ERROR(ReadGraniteScales(md, p, &c));
  FERRY_RETURN_IF_ERROR(ReadGemma(md, p, &c));
  FERRY_RETURN_IF_ERROR(ReadGptOss(md, p, &c));
  FERRY_RETURN_IF_ERROR(ReadDeepseek2(md, p, &c));
  if (auto v = md.GetInt(p + "vocab_size")) {
    c.n_vocab = static_cast<int32_t>(*v);
  } else if (const MetaValue* toks = md.Find("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int32_t>(toks->arr.size());
  }
  FERRY_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status ModelConfig::Validate() const {
  FERRY_RETURN_IF_ERROR(CheckArchitecture(arch));
  if (n_vocab <= 0)
    return InvalidArgumentError("vocabulary size unknown: set '{}.vocab_size' or tokenizer.ggml.tokens",
                                arch);
  if (dim <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || ffn_dim <= 0 || head_dim <= 0)
    return InvalidArgumentError(
        "non-positive model dimension (dim {}, layers {}, heads {}, kv heads {}, ffn {})", dim, n_layers,
        n_heads, n_kv_heads, ffn_dim);
  if (n_heads % n_kv_heads != 0)
    return InvalidArgumentError("head_count {} is not a multiple of head_count_kv {}", n_heads, n_kv_heads);
  if (!swa_layers.empty() && swa_layers.size() != static_cast<size_t>(n_layers))
    return InvalidArgumentError("{} sliding-window layer flags for {} layers", swa_layers.size(), n_layers);
  if (!nope_layers.empty() && nope_layers.size() != static_cast<size_t>(n_layers))
    return InvalidArgumentError("{} NoPE layer flags for {} layers", nope_layers.size(), n_layers);
  if (rot_dim <= 0 || rot_dim > head_dim || rot_dim % 2 != 0)
    return InvalidArgumentError("rope.dimension_count {} must be even and at most the head size {}", rot_dim,
                                head_dim);
  if (!(rope_attn_factor > 0.0f) || !std::isfinite(rope_attn_factor) || n_ctx_orig < 0)
    return InvalidArgumentError(
        "{}.rope.scaling.attn_factor ({}) must be positive and finite, "
        "rope.scaling.original_context_length ({}) not negative",
        arch, rope_attn_factor, n_ctx_orig);
  if (!(rms_eps > 0.0f) || !(rope_theta > 0.0f))
    return InvalidArgumentError("rms epsilon ({}) and rope freq_base ({}) must be positive", rms_eps,
                                rope_theta);
  return Status::Ok();
}

}  // namespace ferry
