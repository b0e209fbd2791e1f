#include "formats/hf_config.h"

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::formats {
namespace {

using Type = MetaValue::Type;

struct ArchName {
  std::string_view hf;
  std::string_view gguf;
};
constexpr ArchName kArchs[] = {
    {"LlamaForCausalLM", "llama"},
    {"MistralForCausalLM", "llama"},
    {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3"},
    {"Qwen3MoeForCausalLM", "qwen3moe"},
    {"GraniteForCausalLM", "granite"},
    {"SmolLM3ForCausalLM", "smollm3"},
    {"Olmo2ForCausalLM", "olmo2"},
    {"Gemma2ForCausalLM", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3"},
    {"Phi3ForCausalLM", "phi3"},
    {"GptOssForCausalLM", "gpt-oss"},
    {"DeepseekV2ForCausalLM", "deepseek2"},
};

std::optional<int64_t> JsonInt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}
std::optional<double> JsonFloat(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Integers the model shape depends on: present, positive and small enough to multiply safely.
Status RequirePositive(const nlohmann::json& j, const char* key, const std::string& path, int64_t* out) {
  auto v = JsonInt(j, key);
  if (!v) return InvalidArgumentError("{}: missing or non-integer \"{}\"", path, key);
  if (*v <= 0 || *v > (int64_t{1} << 31))
    return InvalidArgumentError("{}: \"{}\" = {} is out of range", path, key, *v);
  *out = *v;
  return Status::Ok();
}

// Granite's multipliers under llama.cpp's GGUF keys. transformers' GraniteConfig defaults each
// to 1.0 (so a missing attention_multiplier scores q.k unscaled, as transformers runs it).
void GraniteScales(const nlohmann::json& config, Metadata* meta) {
  meta->SetFloat("granite.embedding_scale", JsonFloat(config, "embedding_multiplier").value_or(1.0));
  meta->SetFloat("granite.attention.scale", JsonFloat(config, "attention_multiplier").value_or(1.0));
  meta->SetFloat("granite.residual_scale", JsonFloat(config, "residual_multiplier").value_or(1.0));
  meta->SetFloat("granite.logit_scale", JsonFloat(config, "logits_scaling").value_or(1.0));
}

// SmolLM3's "no_rope_layers": [layers], 1 = the layer uses RoPE (transformers' default: every
// no_rope_layer_interval-th layer, counting from 1, does not). Stored as Ferry's
// "ferry.rope.nope_layers" (1 = no RoPE), which model_config reads for any architecture.
Status SmolLM3NopeLayers(const nlohmann::json& config, const std::string& path, int64_t layers,
                         Metadata* meta) {
  std::vector<int32_t> nope;
  if (auto it = config.find("no_rope_layers"); it != config.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int64_t>(it->size()) != layers)
      return InvalidArgumentError("{}: \"no_rope_layers\" must list one flag per layer ({})", path, layers);
    for (const nlohmann::json& v : *it) {
      if (!v.is_number_integer())
        return InvalidArgumentError("{}: \"no_rope_layers\" holds a non-integer", path);
      nope.push_back(v.get<int64_t>() == 0 ? 1 : 0);
    }
  } else {
    const int64_t interval = JsonInt(config, "no_rope_layer_interval").value_or(4);
    if (interval <= 0) return InvalidArgumentError("{}: \"no_rope_layer_interval\" must be positive", path);
    for (int64_t l = 0; l < layers; ++l) nope.push_back((l + 1) % interval == 0 ? 1 : 0);
  }
  meta->SetIntArray("ferry.rope.nope_layers", nope);
  return Status::Ok();
}

// Qwen3-MoE: experts, top k and their width; norm_topk_prob says whether the top-k weights are
// renormalized (llama.cpp always does for qwen3moe; the real configs say true).
Status Qwen3MoeConfig(const nlohmann::json& config, const std::string& path, Metadata* meta) {
  int64_t experts = 0, used = 0, width = 0;
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_experts", path, &experts));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_experts_per_tok", path, &used));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "moe_intermediate_size", path, &width));
  if (auto it = config.find("mlp_only_layers"); it != config.end() && it->is_array() && !it->empty())
    return UnsupportedError("{}: \"mlp_only_layers\" (dense layers among MoE ones) is not supported", path);
  if (JsonInt(config, "decoder_sparse_step").value_or(1) != 1)
    return UnsupportedError("{}: \"decoder_sparse_step\" other than 1 is not supported", path);
  meta->SetUint("qwen3moe.expert_count", static_cast<uint64_t>(experts));
  meta->SetUint("qwen3moe.expert_used_count", static_cast<uint64_t>(used));
  meta->SetUint("qwen3moe.expert_feed_forward_length", static_cast<uint64_t>(width));
  meta->SetBool("qwen3moe.expert_weights_norm", config.value("norm_topk_prob", true));
  return Status::Ok();
}

// Gemma 2/3 under the GGUF keys llama.cpp's converter writes (conversion/gemma.py), plus
// query_pre_attn_scalar as Ferry's ferry.attention.scale (llama.cpp infers it from the size).
Status GemmaConfig(const nlohmann::json& config, const std::string& path, const std::string& arch,
                   int64_t layers, Metadata* meta) {
  const std::string act = config.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    return UnsupportedError("{}: \"hidden_activation\" '{}' is not supported (gelu_pytorch_tanh is)", path,
                            act);
  if (auto q = JsonFloat(config, "query_pre_attn_scalar")) {
    if (!(*q > 0)) return InvalidArgumentError("{}: \"query_pre_attn_scalar\" must be positive", path);
    meta->SetFloat("ferry.attention.scale",
                   1.0f / std::sqrt(static_cast<float>(*q)));  // as the GGUF path rounds
  }
  if (auto w = JsonInt(config, "sliding_window"))
    meta->Set(arch + ".attention.sliding_window",
              MetaValue::Uint(static_cast<uint64_t>(std::max<int64_t>(*w, 0)), Type::kU32));
  // A null cap is no capping: written as 0, which the config reads as none.
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (auto it = config.find(key); it != config.end())
      meta->SetFloat(arch + "." + key, it->is_number() ? it->get<double>() : 0.0);
  if (arch != "gemma3") return Status::Ok();
  if (auto base = JsonFloat(config, "rope_local_base_freq"))
    meta->SetFloat("gemma3.rope.freq_base_swa", *base);
  if (auto it = config.find("layer_types"); it != config.end() && it->is_array()) {
    if (static_cast<int64_t>(it->size()) != layers)
      return InvalidArgumentError("{}: \"layer_types\" must list one type per layer ({})", path, layers);
    std::vector<int32_t> sliding;
    for (const nlohmann::json& t : *it)
      sliding.push_back(t.is_string() && t.get<std::string>() == "sliding_attention");
    meta->SetIntArray("gemma3.attention.sliding_window_pattern", sliding);
  } else if (auto period = JsonInt(config, "sliding_window_pattern")) {
    meta->Set("gemma3.attention.sliding_window_pattern",
              MetaValue::Uint(static_cast<uint64_t>(std::max<int64_t>(*period, 0)), Type::kU32));
  }
  return Status::Ok();
}

// gpt-oss under the GGUF keys of llama.cpp's conversion/gpt_oss.py: the experts (intermediate_size
// is each expert's width), the window and which layers slide (layer_types; transformers' default
// is every even layer, as the GGUF pattern's). Its clamped SwiGLU's limit is fixed at 7 in the
// forward pass, as llama.cpp fixes it: another value is refused, not run differently.
Status GptOssConfig(const nlohmann::json& config, const std::string& path, int64_t layers, int64_t ffn,
                    Metadata* meta) {
  int64_t experts = 0, used = 0, window = 0;
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_local_experts", path, &experts));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_experts_per_tok", path, &used));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "sliding_window", path, &window));
  if (used > experts)
    return InvalidArgumentError("{}: \"num_experts_per_tok\" {} exceeds \"num_local_experts\" {}", path, used,
                                experts);
  if (auto limit = JsonFloat(config, "swiglu_limit"); limit && *limit != 7.0)
    return UnsupportedError("{}: \"swiglu_limit\" {} is not supported (gpt-oss's 7.0 is)", path, *limit);
  if (!config.value("attention_bias", true))
    return UnsupportedError(
        "{}: gpt-oss without attention biases (\"attention_bias\": false) is not supported", path);
  meta->SetUint("gpt-oss.expert_count", static_cast<uint64_t>(experts));
  meta->SetUint("gpt-oss.expert_used_count", static_cast<uint64_t>(used));
  meta->SetUint("gpt-oss.expert_feed_forward_length", static_cast<uint64_t>(ffn));
  meta->SetUint("gpt-oss.attention.sliding_window", static_cast<uint64_t>(window));
  if (auto it = config.find("layer_types"); it != config.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int64_t>(it->size()) != layers)
      return InvalidArgumentError("{}: \"layer_types\" must list one type per layer ({})", path, layers);
    std::vector<int32_t> sliding;
    for (const nlohmann::json& t : *it) {
      const std::string type = t.is_string() ? t.get<std::string>() : "";
      if (type != "sliding_attention" && type != "full_attention")
        return InvalidArgumentError(
            "{}: \"layer_types\" holds '{}' (sliding_attention or full_attention expected)", path, t.dump());
      sliding.push_back(type == "sliding_attention");
    }
    meta->SetIntArray("gpt-oss.attention.sliding_window_pattern", sliding);
  }
  return Status::Ok();
}

// DeepSeek-V2 under the GGUF keys of llama.cpp's conversion/deepseek.py (DeepseekV2Model): MLA
// as one latent KV head (key_length = kv_lora_rank + rope dims, value_length = kv_lora_rank, a
// head's real sizes as key/value_length_mla), leading dense layers, routed and shared experts,
// YaRN's mscale_all_dim as 0.1 x yarn_log_multiplier. Routing the forward pass does not run
// (grouped top-k, sigmoid scores) is refused, not approximated.
Status DeepseekV2Config(const nlohmann::json& config, const std::string& path, int64_t layers,
                        Metadata* meta) {
  int64_t rank = 0, nope = 0, rope = 0, v = 0, q_rank = 0;
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "kv_lora_rank", path, &rank));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "qk_nope_head_dim", path, &nope));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "qk_rope_head_dim", path, &rope));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "v_head_dim", path, &v));
  if (config.contains("q_lora_rank") && !config["q_lora_rank"].is_null())
    FERRY_RETURN_IF_ERROR(RequirePositive(config, "q_lora_rank", path, &q_rank));
  if (config.value("attention_bias", false))
    return UnsupportedError(
        "{}: DeepSeek-V2 with attention biases (\"attention_bias\": true) is not supported", path);
  if (rope % 2 != 0) return InvalidArgumentError("{}: \"qk_rope_head_dim\" {} must be even", path, rope);
  auto u32 = [&](const std::string& key, int64_t x) {
    meta->Set("deepseek2." + key, MetaValue::Uint(static_cast<uint64_t>(x), Type::kU32));
  };
  u32("attention.head_count_kv", 1);
  u32("attention.key_length", rank + rope);
  u32("attention.value_length", rank);
  u32("attention.key_length_mla", nope + rope);
  u32("attention.value_length_mla", v);
  u32("attention.kv_lora_rank", rank);
  if (q_rank > 0) u32("attention.q_lora_rank", q_rank);
  u32("rope.dimension_count", rope);
  const bool moe = config.contains("n_routed_experts") && !config["n_routed_experts"].is_null();
  int64_t dense = moe ? 0 : layers;
  if (auto k = JsonInt(config, "first_k_dense_replace")) dense = *k;
  if (dense < 0 || dense > layers)
    return InvalidArgumentError("{}: \"first_k_dense_replace\" {} is outside [0, {}]", path, dense, layers);
  u32("leading_dense_block_count", dense);
  if (moe) {
    int64_t experts = 0, used = 0, width = 0;
    FERRY_RETURN_IF_ERROR(RequirePositive(config, "n_routed_experts", path, &experts));
    FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_experts_per_tok", path, &used));
    FERRY_RETURN_IF_ERROR(RequirePositive(config, "moe_intermediate_size", path, &width));
    if (used > experts)
      return InvalidArgumentError("{}: \"num_experts_per_tok\" {} exceeds \"n_routed_experts\" {}", path,
                                  used, experts);
    if (JsonInt(config, "moe_layer_freq").value_or(1) != 1)
      return UnsupportedError("{}: \"moe_layer_freq\" other than 1 is not supported", path);
    const std::string scoring = config.value("scoring_func", std::string("softmax"));
    if (scoring != "softmax")
      return UnsupportedError("{}: \"scoring_func\" '{}' is not supported (softmax is)", path, scoring);
    const std::string topk = config.value("topk_method", std::string("greedy"));
    const int64_t groups = JsonInt(config, "n_group").value_or(1),
                  topk_group = JsonInt(config, "topk_group").value_or(groups);
    if (topk != "greedy" && !(topk == "group_limited_greedy" && topk_group >= groups))
      return UnsupportedError(
          "{}: \"topk_method\" '{}' with n_group {} / topk_group {} (grouped expert routing) is not "
          "supported "
          "(greedy is)",
          path, topk, groups, topk_group);
    u32("expert_count", experts);
    u32("expert_used_count", used);
    u32("expert_feed_forward_length", width);
    u32("expert_shared_count", JsonInt(config, "n_shared_experts").value_or(0));
    if (auto s = JsonFloat(config, "routed_scaling_factor"))
      meta->SetFloat("deepseek2.expert_weights_scale", *s);
    if (config.value("norm_topk_prob", false)) meta->SetBool("deepseek2.expert_weights_norm", true);
  }
  if (auto it = config.find("rope_scaling"); it != config.end() && it->is_object()) {
    const auto m_all = JsonFloat(*it, "mscale_all_dim"), m = JsonFloat(*it, "mscale");
    if (m && m_all && *m != *m_all)
      return UnsupportedError(
          "{}: rope_scaling \"mscale\" {} differs from \"mscale_all_dim\" {} (llama.cpp and Ferry take them "
          "equal)",
          path, *m, *m_all);
    if (m_all) meta->SetFloat("deepseek2.rope.scaling.yarn_log_multiplier", 0.1 * *m_all);
  }
  return Status::Ok();
}

// One of LongRoPE's factor lists: rot_dim / 2 positive numbers.
Status LongRopeFactors(const nlohmann::json& rs, const char* key, const std::string& path, int64_t rot_dim,
                       std::vector<float>* out) {
  auto it = rs.find(key);
  if (it == rs.end() || !it->is_array() || static_cast<int64_t>(it->size()) != rot_dim / 2)
    return InvalidArgumentError("{}: rope_scaling \"{}\" must list {} numbers (rotated dims / 2)", path, key,
                                rot_dim / 2);
  for (const nlohmann::json& v : *it) {
    if (!v.is_number() || !(v.get<double>() > 0))
      return InvalidArgumentError("{}: rope_scaling \"{}\" holds a value that is not a positive number", path,
                                  key);
    out->push_back(static_cast<float>(v.get<double>()));
  }
  return Status::Ok();
}

// Phi-3 LongRoPE ("longrope", older "su") as llama.cpp's converter writes it (conversion/phi.py):
// the two factor lists as tensors, the original context, and the attention factor (the
// config's attention_factor, else sqrt(1 + ln(s) / ln(original)) with s = max_position_embeddings /
// original, 1 when s <= 1, as transformers computes it).
Status Phi3LongRope(const nlohmann::json& config, const nlohmann::json& rs, const std::string& path,
                    int64_t rot_dim, int64_t context, Metadata* meta, HfConfigResult* result) {
  FERRY_RETURN_IF_ERROR(LongRopeFactors(rs, "long_factor", path, rot_dim, &result->rope_factors_long));
  FERRY_RETURN_IF_ERROR(LongRopeFactors(rs, "short_factor", path, rot_dim, &result->rope_factors_short));
  auto orig = JsonInt(config, "original_max_position_embeddings");
  if (!orig) orig = JsonInt(rs, "original_max_position_embeddings");
  if (!orig || *orig <= 1 || *orig > (int64_t{1} << 31))
    return InvalidArgumentError("{}: LongRoPE needs \"original_max_position_embeddings\" > 1", path);
  const double scale = static_cast<double>(context) / static_cast<double>(*orig);
  double attn_factor =
      scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(*orig))) : 1.0;
  if (auto f = JsonFloat(rs, "attention_factor")) attn_factor = *f;
  if (!(attn_factor > 0) || !std::isfinite(attn_factor))
    return InvalidArgumentError("{}: rope_scaling \"attention_factor\" must be positive", path);
  meta->Set("phi3.rope.scaling.original_context_length",
            MetaValue::Uint(static_cast<uint64_t>(*orig), Type::kU32));
  meta->SetFloat("phi3.rope.scaling.attn_factor", attn_factor);
  return Status::Ok();
}

}  // namespace

std::vector<float> Llama3RopeFactors(double rope_theta, int64_t rot_dim, double factor,
                                     double low_freq_factor, double high_freq_factor,
                                     double original_context) {
  // Mirrors the float32 torch arithmetic of convert_hf_to_gguf.py.
  const double low_freq_wavelen = original_context / low_freq_factor;
  const double high_freq_wavelen = original_context / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < rot_dim; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(rot_dim);
    const float freq = 1.0f / std::pow(static_cast<float>(rope_theta), exponent);
    const float wavelen = static_cast<float>(2 * M_PI) / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const float smooth =
          (static_cast<float>(original_context) / wavelen - static_cast<float>(low_freq_factor)) /
          static_cast<float>(high_freq_factor - low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / static_cast<float>(factor) + smooth));
    }
  }
  return out;
}

Status HfConfigToMetadata(const nlohmann::json& config, const std::string& path,
                          const std::string& default_name, Metadata* meta, HfConfigResult* result) {
  if (!config.is_object()) return InvalidArgumentError("{}: config is not a JSON object", path);
  std::string hf_arch;
  if (auto it = config.find("architectures");
      it != config.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    hf_arch = (*it)[0].get<std::string>();
  for (const ArchName& a : kArchs)
    if (hf_arch == a.hf) result->arch = a.gguf;
  if (result->arch.empty())
    return UnsupportedError(
        "{}: architecture '{}' is not supported (Ferry reads LlamaForCausalLM, MistralForCausalLM, "
        "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, GraniteForCausalLM, "
        "SmolLM3ForCausalLM, Olmo2ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM, "
        "GptOssForCausalLM and DeepseekV2ForCausalLM folders)",
        path, hf_arch.empty() ? "<missing \"architectures\">" : hf_arch);
  const std::string& arch = result->arch;

  int64_t hidden = 0, layers = 0, heads = 0, ffn = 0, vocab = 0;
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "hidden_size", path, &hidden));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_hidden_layers", path, &layers));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_attention_heads", path, &heads));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "intermediate_size", path, &ffn));
  FERRY_RETURN_IF_ERROR(RequirePositive(config, "vocab_size", path, &vocab));
  int64_t kv_heads = heads;
  if (config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null())
    FERRY_RETURN_IF_ERROR(RequirePositive(config, "num_key_value_heads", path, &kv_heads));
  int64_t head_dim = 0;
  if (config.contains("head_dim") && !config["head_dim"].is_null()) {
    FERRY_RETURN_IF_ERROR(RequirePositive(config, "head_dim", path, &head_dim));
  } else {
    if (hidden % heads != 0)
      return InvalidArgumentError("{}: hidden_size {} is not a multiple of num_attention_heads {}", path,
                                  hidden, heads);
    head_dim = hidden / heads;
  }
  if (head_dim % 2 != 0) return InvalidArgumentError("{}: head dim {} must be even for RoPE", path, head_dim);
  const int64_t context = JsonInt(config, "max_position_embeddings").value_or(2048);
  const double eps = JsonFloat(config, "rms_norm_eps").value_or(1e-6);
  const double theta = JsonFloat(config, "rope_theta").value_or(10000.0);
  std::string name = default_name;
  if (auto it = config.find("_name_or_path"); it != config.end() && it->is_string() && !it->empty())
    name = it->get<std::string>();

  auto u32 = [&](const std::string& key, int64_t v) {
    meta->Set(arch + "." + key, MetaValue::Uint(static_cast<uint64_t>(v), Type::kU32));
  };
  meta->SetString("general.architecture", arch);
  meta->SetString("general.name", name);
  u32("context_length", context);
  u32("embedding_length", hidden);
  u32("block_count", layers);
  u32("feed_forward_length", ffn);
  u32("attention.head_count", heads);
  u32("attention.head_count_kv", kv_heads);
  meta->SetFloat(arch + ".attention.layer_norm_rms_epsilon", eps);
  meta->SetFloat(arch + ".rope.freq_base", theta);
  // Partial rotary (Phi-4-mini: 0.75): transformers rotates int(head_dim * factor) dims.
  int64_t rot_dim = head_dim;
  if (auto f = JsonFloat(config, "partial_rotary_factor")) {
    rot_dim = static_cast<int64_t>(static_cast<double>(head_dim) * *f);
    if (!(*f > 0 && *f <= 1) || rot_dim <= 0 || rot_dim % 2 != 0)
      return InvalidArgumentError(
          "{}: \"partial_rotary_factor\" {} must be in (0, 1] and rotate an even number of the {} head dims",
          path, *f, head_dim);
  }
  u32("rope.dimension_count", rot_dim);
  // head_dim may differ from hidden/heads (e.g. Qwen3, Gemma): state it explicitly.
  u32("attention.key_length", head_dim);
  u32("attention.value_length", head_dim);
  u32("vocab_size", vocab);

  if (auto it = config.find("rope_scaling"); it != config.end() && !it->is_null()) {
    const nlohmann::json& rs = *it;
    if (!rs.is_object()) return InvalidArgumentError("{}: \"rope_scaling\" is not an object", path);
    std::string type;
    for (const char* key : {"rope_type", "type"})
      if (auto t = rs.find(key); t != rs.end() && t->is_string()) type = t->get<std::string>();
    const double factor = JsonFloat(rs, "factor").value_or(type == "llama3" ? 8.0 : 1.0);
    if (type == "llama3") {
      const double low = JsonFloat(rs, "low_freq_factor").value_or(1.0);
      const double high = JsonFloat(rs, "high_freq_factor").value_or(4.0);
      // llama.cpp reads the top-level key (default 8192); HF reads rope_scaling's. Real configs
      // agree; prefer the top level like llama.cpp, then rope_scaling's.
      const double orig = JsonFloat(config, "original_max_position_embeddings")
                              .value_or(JsonFloat(rs, "original_max_position_embeddings").value_or(8192.0));
      if (!(high > low) || !(factor > 0) || !(orig > 0))
        return InvalidArgumentError(
            "{}: llama3 rope_scaling needs high_freq_factor > low_freq_factor and a "
            "positive factor, got low {} high {} factor {}",
            path, low, high, factor);
      result->rope_freqs = Llama3RopeFactors(theta, head_dim, factor, low, high, orig);
    } else if (type == "linear" || type == "yarn") {
      meta->SetString(arch + ".rope.scaling.type", type);
      meta->SetFloat(arch + ".rope.scaling.factor", factor);
      if (type == "yarn") {
        if (auto orig = JsonFloat(rs, "original_max_position_embeddings"))
          u32("rope.scaling.original_context_length", static_cast<int64_t>(*orig));
        // The ramp's ends: llama.cpp's defaults (32, 1) are what the forward pass uses.
        for (auto [key, def] : {std::pair<const char*, double>{"beta_fast", 32.0}, {"beta_slow", 1.0}})
          if (auto v = JsonFloat(rs, key); v && *v != def)
            return UnsupportedError("{}: yarn rope_scaling \"{}\" {} is not supported (only {} is)", path,
                                    key, *v, def);
      }
    } else if ((type == "longrope" || type == "su") && arch == "phi3") {
      FERRY_RETURN_IF_ERROR(Phi3LongRope(config, rs, path, rot_dim, context, meta, result));
    } else if (type != "default" && !type.empty()) {
      return UnsupportedError(
          "{}: rope_scaling type '{}' is not supported (llama3, linear, yarn are; longrope for "
          "Phi3ForCausalLM)",
          path, type);
    }
  }

  if (arch == "granite") GraniteScales(config, meta);
  if (arch == "smollm3") FERRY_RETURN_IF_ERROR(SmolLM3NopeLayers(config, path, layers, meta));
  if (arch == "qwen3moe") FERRY_RETURN_IF_ERROR(Qwen3MoeConfig(config, path, meta));
  if (arch == "gpt-oss") FERRY_RETURN_IF_ERROR(GptOssConfig(config, path, layers, ffn, meta));
  if (arch == "deepseek2") FERRY_RETURN_IF_ERROR(DeepseekV2Config(config, path, layers, meta));
  if (arch == "gemma2" || arch == "gemma3") {
    FERRY_RETURN_IF_ERROR(GemmaConfig(config, path, arch, layers, meta));
    result->norm_shift = 1.0f;
  }

  for (const char* key : {"bos_token_id", "eos_token_id"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    const nlohmann::json* v = &*it;
    if (v->is_array() && !v->empty()) v = &(*v)[0];  // Llama 3.1 lists several eos ids
    if (v->is_number_unsigned())
      meta->Set(std::string("tokenizer.ggml.") + key, MetaValue::Uint(v->get<uint64_t>(), Type::kU32));
  }
  result->tied_embeddings = config.value("tie_word_embeddings", false);
  // DeepSeek's modeling code rotates interleaved pairs of q_pe / k_pe (it regroups them before
  // rotate_half), as llama.cpp's NORM RoPE does on the unpermuted weights.
  if (arch != "deepseek2") meta->SetBool("ferry.rope.neox", true);
  return Status::Ok();
}

}  // namespace ferry::formats
