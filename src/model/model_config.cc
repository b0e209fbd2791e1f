#include "model/model_config.h"

namespace ferry {
namespace {

// llama.cpp's keys: "{arch}.expert_count", "expert_used_count", "expert_feed_forward_length",
// "expert_shared_feed_forward_length", "expert_weights_norm". Mixtral GGUFs (arch llama) give
// the expert width as feed_forward_length; llama.cpp normalizes the top-k weights for llama
// and not for qwen2moe unless expert_weights_norm says so.
Status ReadMoeConfig(const Metadata& md, const std::string& p, ModelConfig* c) {
  const int64_t n_expert = md.GetInt(p + "expert_count").value_or(0);
  if (n_expert == 0) {
    if (c->arch == "qwen2moe") return InvalidArgumentError("metadata key '{}expert_count' is missing", p);
    return Status::Ok();
  }
  const int64_t used = md.GetInt(p + "expert_used_count").value_or(0);
  if (n_expert < 0 || n_expert > 4096 || used <= 0 || used > n_expert)
    return InvalidArgumentError("'{}expert_count' = {} and '{}expert_used_count' = {} must satisfy 1 <= used <= count <= 4096",
                                p, n_expert, p, used);
  const int64_t ffn = md.GetInt(p + "expert_feed_forward_length").value_or(c->ffn_dim);
  const int64_t shared = md.GetInt(p + "expert_shared_feed_forward_length").value_or(0);
  if (ffn <= 0 || ffn > (1 << 30) || shared < 0 || shared > (1 << 30))
    return InvalidArgumentError("'{}expert_feed_forward_length' = {} / '{}expert_shared_feed_forward_length' = {} out of range",
                                p, ffn, p, shared);
  c->n_expert = static_cast<int32_t>(n_expert);
  c->n_expert_used = static_cast<int32_t>(used);
  c->expert_ffn_dim = static_cast<int32_t>(ffn);
  c->shared_expert_ffn_dim = static_cast<int32_t>(shared);
  c->expert_weights_norm = md.GetBool(p + "expert_weights_norm").value_or(c->arch != "qwen2moe");
  return Status::Ok();
}

}  // namespace

Status CheckArchitecture(const std::string& arch) {
  if (arch != "llama" && arch != "qwen2" && arch != "qwen2moe")
    return UnsupportedError("architecture '{}' is not supported (supported: llama, qwen2, qwen2moe)", arch);
  return Status::Ok();
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
    if (*v <= 0 || *v > (1 << 30)) return InvalidArgumentError("metadata key '{}{}' = {} is out of range", p, key, *v);
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
  } else if (scaling != "none") {
    // Never run a model with positions encoded differently from how it was trained.
    return UnsupportedError("rope scaling type '{}' ('{}rope.scaling.type') is not supported yet (none, linear)",
                            scaling, p);
  }
  // llama.cpp: llama uses "normal" (interleaved) rope, qwen2 neox. HF folders keep q/k in
  // rotate-half order, which is neox style whatever the architecture.
  c.rope_neox = c.arch == "qwen2" || c.arch == "qwen2moe" || md.GetBool("ferry.rope.neox").value_or(false);
  FERRY_RETURN_IF_ERROR(ReadMoeConfig(md, p, &c));
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
    return InvalidArgumentError("non-positive model dimension (dim {}, layers {}, heads {}, kv heads {}, ffn {})", dim,
                                n_layers, n_heads, n_kv_heads, ffn_dim);
  if (n_heads % n_kv_heads != 0)
    return InvalidArgumentError("head_count {} is not a multiple of head_count_kv {}", n_heads, n_kv_heads);
  if (rot_dim <= 0 || rot_dim > head_dim || rot_dim % 2 != 0)
    return InvalidArgumentError("rope.dimension_count {} must be even and at most the head size {}", rot_dim, head_dim);
  if (!(rms_eps > 0.0f) || !(rope_theta > 0.0f))
    return InvalidArgumentError("rms epsilon ({}) and rope freq_base ({}) must be positive", rms_eps, rope_theta);
  return Status::Ok();
}

}  // namespace ferry
