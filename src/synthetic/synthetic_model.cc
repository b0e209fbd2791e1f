#include "synthetic/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "base/check.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/kernels.h"

namespace ferry {
namespace {

// Shapes as the real models (tinyllama/smollm from their config.json files).
const std::vector<ModelPreset> kPresets = {
    {"tiny", "llama", 512, 64, 2, 4, 2, 192, 512, 10000.0f, false},
    {"tiny-qwen2", "qwen2", 512, 64, 2, 4, 2, 192, 512, 1000000.0f, true},
    // tiny with tinyllama's head_dim (64), so q8_0/q4_0 KV caches (blocks of 32 per head) fit.
    {"tiny-hd64", "llama", 512, 256, 2, 4, 2, 512, 512, 10000.0f, false},
    {"smollm-135m", "llama", 49152, 576, 30, 9, 3, 1536, 2048, 10000.0f, true},
    {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 5632, 2048, 10000.0f, false},
    // A draft for smollm-135m (speculative decoding): its vocabulary, ~8x fewer weights read per token.
    {"smollm-draft", "llama", 49152, 256, 4, 4, 2, 768, 2048, 10000.0f, true},
    {"moe-tiny", "llama", 512, 64, 2, 4, 2, 128, 512, 10000.0f, false, 8, 2, 0},
    {"qwen2moe-tiny", "qwen2moe", 512, 64, 2, 4, 2, 64, 512, 1000000.0f, true, 8, 4, 128},
    // Mixtral 8x7B: dim 4096, ffn 14336 (3.5x), 32/8 heads, theta 1e6, 8 experts top-2.
    {"mixtral-mini", "llama", 32000, 1024, 8, 16, 4, 3584, 4096, 1000000.0f, false, 8, 2, 0},
    {"mixtral-mini-dense", "llama", 32000, 1024, 8, 16, 4, 8 * 3584, 4096, 1000000.0f, false},
    // qwen3: per-head q/k norms; head_dim 32 is not dim / heads (as Qwen3's 128 at 1024 / 16).
    {"qwen3-tiny", "qwen3", 512, 64, 2, 4, 2, 192, 512, 1000000.0f, true, 0, 0, 0, 32},
    {"qwen3moe-tiny", "qwen3moe", 512, 64, 2, 4, 2, 64, 512, 1000000.0f, false, 8, 2, 0, 32},
    {"granite-tiny", "granite", 512, 64, 2, 4, 2, 192, 512, 10000.0f, true},
    // 4 layers: layer 3 is a NoPE layer (llama.cpp: every 4th).
    {"smollm3-tiny", "smollm3", 512, 64, 4, 4, 2, 192, 512, 10000.0f, true},
    // olmo2: post norms only, q/k norms over the whole projection; llama.cpp requires output.weight.
    {"olmo2-tiny", "olmo2", 512, 64, 2, 4, 2, 192, 512, 500000.0f, false},
    // gemma: window 32 (< the 128-token perplexity windows, so it masks); gemma2's caps small
    // enough to bite on random weights' scores and logits (the real ones are 50 and 30); gemma3
    // with 6 layers for its 5 sliding + 1 global pattern.
    {"gemma2-tiny", "gemma2", 512, 64, 4, 4, 2, 192, 512, 10000.0f, true, 0, 0, 0, 16, 32, 0.05f, 0.5f},
    {"gemma3-tiny", "gemma3", 512, 64, 6, 4, 2, 192, 512, 1000000.0f, true, 0, 0, 0, 32, 32},
    // phi3: Phi-4-mini's partial rotary (12 of head_dim 16 rotated) and LongRoPE with an original
    // context of 64, so the 128-token perplexity windows run the long factors and the 48-token
    // test prompts (on a 64-position cache) the short ones; untied as Phi-3-mini.
    {"phi3-tiny", "phi3", 512, 64, 2, 4, 2, 192, 512, 10000.0f, false, 0, 0, 0, 0, 0, 0.0f, 0.0f, 12, 64},
    // gpt-oss: 4 layers alternating sliding (window 32, < the 128-token perplexity windows) and
    // full; head_dim 32 is not dim / heads (as gpt-oss's 64 at 2880 / 64); 8 experts top-4 of
    // width 64 (MXFP4 blocks of 32); YaRN factor 4 from an original context of 128, whose
    // correction dims (0 .. 5 of 16 pairs) put the ramp inside the head.
    {"gpt-oss-tiny", "gpt-oss", 512, 64,  4,   4, 2, 64, 512, 150000.0f, false, 8, 4, 0, 32, 32,
     0.0f,           0.0f,      0,   128, 4.0f},
    // clang-format off
    // deepseek2: 3 layers (layer 0 dense), 4 heads over a 64-wide latent KV + 32 rotated dims (one
    // 96-wide cached row per token, q8_0-blockable), q through a rank-32 bottleneck, heads of 32 + 32
    // query/key and 32 value dims; 8 experts top-2 of width 32 plus one shared, weights x2.5
    // (unnormalized); YaRN factor 4 from 128 with DeepSeek's mscale_all_dim 0.707.
    {"deepseek2-tiny", "deepseek2", 512, 64, 3, 4, 1, 32, 512, 10000.0f, false,
     8, 2, 0, 96, 0, 0.0f, 0.0f, 32, 128, 4.0f, 64, 32, 32, 32, 1, 1, 128, 2.5f, 0.0707f},
    // clang-format on
    // Real shapes (config.json of Qwen/Qwen3-0.6B, ibm-granite/granite-3.3-2b-base,
    // HuggingFaceTB/SmolLM3-3B).
    {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 3072, 40960, 1000000.0f, true, 0, 0, 0, 128},
    {"granite-3-2b", "granite", 49159, 2048, 40, 32, 8, 8192, 131072, 10000000.0f, true},
    {"smollm3-3b", "smollm3", 128256, 2048, 36, 16, 4, 11008, 65536, 5000000.0f, true},
    // allenai/OLMo-2-0425-1B.
    {"olmo2-1b", "olmo2", 100352, 2048, 16, 16, 16, 8192, 4096, 500000.0f, false},
    // google/gemma-2-2b, google/gemma-3-1b-pt.
    {"gemma2-2b", "gemma2", 256000, 2304, 26, 8, 4, 9216, 8192, 10000.0f, true, 0, 0, 0, 256, 4096, 50.0f,
     30.0f},
    {"gemma3-1b", "gemma3", 262144, 1152, 26, 4, 1, 6912, 32768, 1000000.0f, true, 0, 0, 0, 256, 512},
    // microsoft/Phi-4-mini-instruct: partial_rotary_factor 0.75, LongRoPE from 4096 to 131072.
    {"phi4-mini", "phi3", 200064, 3072, 32, 24, 8,    8192, 131072, 10000.0f,
     true,        0,      0,      0,    0,  0,  0.0f, 0.0f, 96,     4096},
    // openai/gpt-oss-20b: 24 layers, 64 heads of 64 (8 KV), 32 experts top-4 of 2880, window 128,
    // YaRN factor 32 from 4096.
    {"gpt-oss-20b", "gpt-oss", 201088, 2880, 24,   64,   8, 2880, 131072, 150000.0f, false, 32, 4, 0, 64,
     128,           0.0f,      0.0f,   0,    4096, 32.0f},
    // Qwen/Qwen3-30B-A3B: 48 layers, 32 heads of 128 (4 KV), 128 experts top-8 of 768, no shared
    // expert, untied (about 17 GB at q4_0).
    {"qwen3moe-30b-a3b", "qwen3moe", 151936, 2048, 48, 32, 4, 768, 40960, 1000000.0f, false, 128, 8, 0, 128},
    // clang-format off
    // deepseek-ai/DeepSeek-V2-Lite: 27 layers (1 dense of 10944), 16 heads, latent 512 + 64 rotated,
    // no q bottleneck, 128 + 64 query/key and 128 value dims per head, 64 experts top-6 of 1408 plus
    // 2 shared, YaRN 40 from 4096 (about 9 GB at q4_0: shapes for `ferry info`/benchmarks).
    {"deepseek-v2-lite", "deepseek2", 102400, 2048, 27, 16, 1, 1408, 163840, 10000.0f, false,
     64, 6, 0, 576, 0, 0.0f, 0.0f, 64, 4096, 40.0f, 512, 0, 128, 128, 1, 2, 10944, 1.0f, 0.0707f},
    // clang-format on
};

// Granite 3.x's multipliers (granite-3.3-2b's config.json): llama.cpp's GGUF keys.
void AddGraniteScales(Metadata& md) {
  md.SetFloat("granite.embedding_scale", 12.0);
  md.SetFloat("granite.attention.scale", 0.015625);
  md.SetFloat("granite.residual_scale", 0.22);
  md.SetFloat("granite.logit_scale", 8.0);
}

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for a uniform weight type.
int32_t FileType(DType t) {
  switch (t) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ4_1:
      return 3;
    case DType::kQ8_0:
      return 7;
    case DType::kQ5_0:
      return 8;
    case DType::kQ5_1:
      return 9;
    case DType::kQ4_K:
      return 14;  // llama.cpp's MOSTLY_Q4_K_S (Q4_K throughout)
    case DType::kQ6_K:
      return 18;
    case DType::kBF16:
      return 32;
    case DType::kI4G128:
      return 1001;  // Ferry's own (docs/formats.md); llama.cpp has no such type
    case DType::kI8:
      return 1002;  // W8A8 (docs/formats.md "W8A8 tensors")
    case DType::kMXFP4:
      return 38;  // MOSTLY_MXFP4_MOE: experts MXFP4, the rest q8_0
    default:
      return 0;
  }
}

// llama.cpp's Q4_K_M recipe (llama_tensor_get_type): Q6_K for the output head (the token
// embeddings when they double as the head) and for attn_v and ffn_down in the layers its
// use_more_bits picks (the first and last eighth and every third layer between), Q4_K elsewhere.
DType MatrixTypeQ4_K_M(const std::string& name, bool tied_head, int32_t n_layers) {
  if (name == "output.weight" || (tied_head && name == "token_embd.weight")) return DType::kQ6_K;
  const bool v_or_down = name.ends_with(".attn_v.weight") || name.ends_with(".ffn_down.weight");
  if (!v_or_down || name.rfind("blk.", 0) != 0) return DType::kQ4_K;
  const int32_t layer = std::stoi(name.substr(4));
  const bool more_bits = layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
  return more_bits ? DType::kQ6_K : DType::kQ4_K;
}

// SplitMix64: fast, seedable per row, so weights do not depend on the thread count.
struct SplitMix {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float Uniform() { return static_cast<float>((Next() >> 40) + 1) * (1.0f / 16777217.0f); }  // (0, 1)
};

// Normal samples by Box-Muller.
// Symmetric per-row int8 (W8A8 weights): q = round(x / s), s = max|x| / 127. Returns s.
float QuantizeRowInt8(const float* x, int64_t n, int8_t* q) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float s = amax / 127.f, inv = s > 0.f ? 1.0f / s : 0.f;
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::lround(x[i] * inv));
  return s;
}

void FillNormal(float* out, int64_t n, float stddev, uint64_t seed) {
  SplitMix rng{seed};
  for (int64_t i = 0; i < n; i += 2) {
    float r = std::sqrt(-2.0f * std::log(rng.Uniform())) * stddev;
    float a = 6.2831853f * rng.Uniform();
    out[i] = r * std::cos(a);
    if (i + 1 < n) out[i + 1] = r * std::sin(a);
  }
}

// A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces made of
// frequent letters, with and without the word-start marker, shortest first; `controls` replace
// the last pieces as control tokens (a family's markers that llama.cpp's loader looks up).
void AddSyntheticVocab(Metadata& md, int32_t n_vocab, const std::vector<std::string>& controls) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(6);
  }
  const std::string kSpace = "\xE2\x96\x81";  // U+2581
  tokens.push_back(kSpace);
  types.push_back(1);
  for (char c = 33; c < 127; ++c) {
    tokens.push_back(std::string(1, c));
    types.push_back(1);
  }
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  std::vector<std::string> words = {""};
  while (static_cast<int32_t>(tokens.size()) < n_vocab) {
    std::vector<std::string> longer;
    for (const auto& w : words)
      for (char c : letters) longer.push_back(w + c);
    for (const auto& w : longer) {
      for (const std::string& piece : {kSpace + w, w}) {
        if (static_cast<int32_t>(tokens.size()) >= n_vocab) break;
        if (piece.size() == 1) continue;  // single letters already present
        tokens.push_back(piece);
        types.push_back(1);
      }
    }
    words = std::move(longer);
  }
  tokens.resize(static_cast<size_t>(n_vocab));
  types.resize(static_cast<size_t>(n_vocab));
  FERRY_CHECK(controls.size() < tokens.size());
  for (size_t i = 0; i < controls.size(); ++i) {
    tokens[tokens.size() - controls.size() + i] = controls[i];
    types[types.size() - controls.size() + i] = 3;
  }
  std::vector<float> scores(static_cast<size_t>(n_vocab), 0.0f);
  for (int32_t i = 0; i < n_vocab; ++i)
    if (types[static_cast<size_t>(i)] == 1) scores[static_cast<size_t>(i)] = -static_cast<float>(i);
  md.SetString("tokenizer.ggml.model", "llama");
  md.SetStringArray("tokenizer.ggml.tokens", tokens);
  md.SetFloatArray("tokenizer.ggml.scores", scores);
  md.SetIntArray("tokenizer.ggml.token_type", types);
  md.SetUint("tokenizer.ggml.bos_token_id", 1);
  md.SetUint("tokenizer.ggml.eos_token_id", 2);
  md.SetUint("tokenizer.ggml.unknown_token_id", 0);
  md.SetBool("tokenizer.ggml.add_bos_token", true);
  md.SetBool("tokenizer.ggml.add_eos_token", false);
}

struct PlannedTensor {
  // kSink: f32 N(0, 2^2) (gpt-oss attention sinks: logits that compete with the scores);
  // kRouter: f32 random (MoE router, shared gate); kQkNorm: f32 1 + noise (qwen3 q/k norms,
  // olmo2's q/k and post norms); kRopeShort / kRopeLong: f32 LongRoPE divisors exp(|N(0, s^2)|),
  // s 0.2 / 1 (all >= 1, the long ones larger, as Phi-3's).
  enum Kind { kMatrix, kNorm, kBias, kRouter, kQkNorm, kRopeShort, kRopeLong, kSink };
  std::string name;
  std::vector<int64_t> shape;  // outermost first
  Kind kind;
};

// The preset options name, or the error listing the presets; an error too for a type make-model
// cannot write.
StatusOr<const ModelPreset*> FindPreset(const SyntheticModelOptions& options) {
  auto it = std::find_if(kPresets.begin(), kPresets.end(),
                         [&](const ModelPreset& p) { return p.name == options.preset; });
  if (it == kPresets.end()) {
    std::string names;
    for (const auto& p : kPresets) names += (names.empty() ? "" : ", ") + p.name;
    return InvalidArgumentError("unknown preset '{}' (choose one of: {})", options.preset, names);
  }
  auto types = SyntheticModelTypes();
  if (std::find(types.begin(), types.end(), options.type) == types.end() ||
      (options.type != DType::kI8 && !kernels::CanQuantize(options.type)))
    return InvalidArgumentError(
        "make-model cannot write type '{}' (choose f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
        "q4_k_m, q6_k, int4_g128, w8a8, mxfp4)",
        DTypeName(options.type));
  if (options.type == DType::kMXFP4 && it->n_expert == 0)
    return InvalidArgumentError(
        "type mxfp4 (llama.cpp's MXFP4_MOE) is for expert tensors: preset '{}' has none", it->name);
  if (options.q4_k_m && options.type != DType::kQ4_K)
    return InvalidArgumentError("the Q4_K_M mix needs type q4_k, not {}", DTypeName(options.type));
  return &*it;
}

// The GGUF metadata of preset p: llama.cpp's keys for its architecture, then the vocabulary.
Metadata PresetMetadata(const ModelPreset& p, const SyntheticModelOptions& options) {
  const int64_t head_dim = p.HeadDim();
  Metadata md;
  const std::string a = p.arch + ".";
  md.SetString("general.architecture", p.arch);
  md.SetString("general.name", "ferry-synthetic-" + p.name);
  md.SetUint("general.file_type",  // u32, as llama.cpp reads it; 15 = MOSTLY_Q4_K_M
             static_cast<uint64_t>(options.q4_k_m ? 15 : FileType(options.type)));
  md.SetUint(a + "context_length", static_cast<uint64_t>(p.n_ctx));
  md.SetUint(a + "embedding_length", static_cast<uint64_t>(p.dim));
  md.SetUint(a + "block_count", static_cast<uint64_t>(p.n_layers));
  md.SetUint(a + "feed_forward_length",
             static_cast<uint64_t>(p.dense_ffn_dim > 0 ? p.dense_ffn_dim : p.ffn_dim));
  md.SetUint(a + "rope.dimension_count", static_cast<uint64_t>(p.RotDim()));
  if (p.yarn_factor > 0) {  // YaRN (llama.cpp conversion of GptOssForCausalLM)
    md.SetString(a + "rope.scaling.type", "yarn");
    md.SetFloat(a + "rope.scaling.factor", p.yarn_factor);
    md.SetUint(a + "rope.scaling.original_context_length", static_cast<uint64_t>(p.n_ctx_orig));
  } else if (p.n_ctx_orig > 0) {  // LongRoPE (llama.cpp conversion/phi.py)
    md.SetUint(a + "rope.scaling.original_context_length", static_cast<uint64_t>(p.n_ctx_orig));
    const double scale = static_cast<double>(p.n_ctx) / p.n_ctx_orig;
    md.SetFloat(a + "rope.scaling.attn_factor", std::sqrt(1.0 + std::log(scale) / std::log(p.n_ctx_orig)));
  }
  if (p.head_dim > 0) {
    md.SetUint(a + "attention.key_length", static_cast<uint64_t>(head_dim));
    md.SetUint(a + "attention.value_length",
               static_cast<uint64_t>(p.kv_lora_rank > 0 ? p.kv_lora_rank : head_dim));
  }
  if (p.kv_lora_rank > 0) {  // llama.cpp's conversion/deepseek.py (DeepseekV2Model)
    md.SetUint(a + "leading_dense_block_count", static_cast<uint64_t>(p.n_dense_layers));
    if (p.q_lora_rank > 0) md.SetUint(a + "attention.q_lora_rank", static_cast<uint64_t>(p.q_lora_rank));
    md.SetUint(a + "attention.kv_lora_rank", static_cast<uint64_t>(p.kv_lora_rank));
    md.SetUint(a + "attention.key_length_mla", static_cast<uint64_t>(p.mla_nope_dim + p.RotDim()));
    md.SetUint(a + "attention.value_length_mla", static_cast<uint64_t>(p.mla_v_dim));
    md.SetUint(a + "expert_shared_count", static_cast<uint64_t>(p.n_shared_experts));
    if (p.expert_weights_scale > 0) md.SetFloat(a + "expert_weights_scale", p.expert_weights_scale);
    if (p.yarn_log_mul > 0) md.SetFloat(a + "rope.scaling.yarn_log_multiplier", p.yarn_log_mul);
  }
  if (p.arch == "granite") AddGraniteScales(md);
  if (p.sliding_window > 0)
    md.SetUint(a + "attention.sliding_window", static_cast<uint64_t>(p.sliding_window));
  if (p.attn_softcap > 0) md.SetFloat(a + "attn_logit_softcapping", p.attn_softcap);
  if (p.final_softcap > 0) md.SetFloat(a + "final_logit_softcapping", p.final_softcap);
  md.SetUint(a + "attention.head_count", static_cast<uint64_t>(p.n_heads));
  md.SetUint(a + "attention.head_count_kv", static_cast<uint64_t>(p.n_kv_heads));
  md.SetFloat(a + "attention.layer_norm_rms_epsilon", 1e-5);
  md.SetFloat(a + "rope.freq_base", p.rope_theta);
  md.SetUint(a + "vocab_size", static_cast<uint64_t>(p.n_vocab));
  if (p.n_expert > 0) {
    md.SetUint(a + "expert_count", static_cast<uint64_t>(p.n_expert));
    md.SetUint(a + "expert_used_count", static_cast<uint64_t>(p.n_expert_used));
    md.SetUint(a + "expert_feed_forward_length", static_cast<uint64_t>(p.ffn_dim));
    if (p.shared_ffn_dim > 0)
      md.SetUint(a + "expert_shared_feed_forward_length", static_cast<uint64_t>(p.shared_ffn_dim));
  }
  // llama.cpp sets attributes on Phi-3's "<|endoftext|>" by name when general.name says phi3.
  AddSyntheticVocab(
      md, p.n_vocab,
      p.arch == "phi3" ? std::vector<std::string>{"<|endoftext|>"} : std::vector<std::string>{});

  return md;
}

// The experts of an MoE layer: llama.cpp's 3-D tensors (ggml ne [dim, ffn, E] = shape [E, ffn,
// dim]); the router stays f32 as llama.cpp's quantizer leaves it.
void PlanExperts(const ModelPreset& p, const std::string& b, std::vector<PlannedTensor>& plan) {
  using K = PlannedTensor::Kind;
  const int64_t E = p.n_expert;
  plan.push_back({b + "ffn_gate_inp.weight", {E, p.dim}, K::kRouter});
  plan.push_back({b + "ffn_gate_exps.weight", {E, p.ffn_dim, p.dim}, K::kMatrix});
  plan.push_back({b + "ffn_up_exps.weight", {E, p.ffn_dim, p.dim}, K::kMatrix});
  plan.push_back({b + "ffn_down_exps.weight", {E, p.dim, p.ffn_dim}, K::kMatrix});
}

// deepseek2's layer after attn_norm (llama.cpp's deepseek2.cpp load_arch_tensors): MLA with the
// split per-head attn_k_b [heads, kv_lora, nope] and attn_v_b [heads, v, kv_lora], then a dense FFN
// (the leading layers) or routed experts plus ungated shared ones. The low-rank norms 1 + noise.
void PlanMlaLayer(const ModelPreset& p, int32_t l, std::vector<PlannedTensor>& plan) {
  using K = PlannedTensor::Kind;
  const std::string b = "blk." + std::to_string(l) + ".";
  const int64_t nh = p.n_heads, kd = p.mla_nope_dim + p.RotDim(), r = p.kv_lora_rank;
  if (p.q_lora_rank > 0) {
    plan.push_back({b + "attn_q_a_norm.weight", {p.q_lora_rank}, K::kQkNorm});
    plan.push_back({b + "attn_q_a.weight", {p.q_lora_rank, p.dim}, K::kMatrix});
    plan.push_back({b + "attn_q_b.weight", {nh * kd, p.q_lora_rank}, K::kMatrix});
  } else {
    plan.push_back({b + "attn_q.weight", {nh * kd, p.dim}, K::kMatrix});
  }
  plan.push_back({b + "attn_kv_a_norm.weight", {r}, K::kQkNorm});
  plan.push_back({b + "attn_kv_a_mqa.weight", {r + p.RotDim(), p.dim}, K::kMatrix});
  plan.push_back({b + "attn_k_b.weight", {nh, r, p.mla_nope_dim}, K::kMatrix});
  plan.push_back({b + "attn_v_b.weight", {nh, p.mla_v_dim, r}, K::kMatrix});
  plan.push_back({b + "attn_output.weight", {p.dim, nh * p.mla_v_dim}, K::kMatrix});
  plan.push_back({b + "ffn_norm.weight", {p.dim}, K::kNorm});
  if (l < p.n_dense_layers) {
    plan.push_back({b + "ffn_gate.weight", {p.dense_ffn_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "ffn_up.weight", {p.dense_ffn_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "ffn_down.weight", {p.dim, p.dense_ffn_dim}, K::kMatrix});
    return;
  }
  PlanExperts(p, b, plan);
  const int64_t sh = int64_t{p.n_shared_experts} * p.ffn_dim;
  plan.push_back({b + "ffn_gate_shexp.weight", {sh, p.dim}, K::kMatrix});
  plan.push_back({b + "ffn_up_shexp.weight", {sh, p.dim}, K::kMatrix});
  plan.push_back({b + "ffn_down_shexp.weight", {p.dim, sh}, K::kMatrix});
}

// Layer l's tensors, in llama.cpp's names and shapes for p's architecture.
void PlanLayer(const ModelPreset& p, int32_t l, std::vector<PlannedTensor>& plan) {
  using K = PlannedTensor::Kind;
  const int64_t head_dim = p.HeadDim();
  const int64_t q_dim = head_dim * p.n_heads, kv_dim = head_dim * p.n_kv_heads;
  const bool bias = p.arch == "qwen2" || p.arch == "qwen2moe";
  const bool phi3 = p.arch == "phi3";  // q|k|v in one attn_qkv, gate|up in one ffn_up
  std::string b = "blk." + std::to_string(l) + ".";
  const bool olmo2 = p.arch == "olmo2";  // no pre norms; post norms; q/k norms over all heads
  // gemma: pre and post norms, all 1 + noise (GGUFs hold gemma's 1 + w as the weight).
  const bool gemma = p.arch == "gemma2" || p.arch == "gemma3";
  const bool oss = p.arch == "gpt-oss";
  if (!olmo2) plan.push_back({b + "attn_norm.weight", {p.dim}, gemma ? K::kQkNorm : K::kNorm});
  if (p.kv_lora_rank > 0) {
    PlanMlaLayer(p, l, plan);
    return;
  }
  if (phi3) {
    plan.push_back({b + "attn_qkv.weight", {q_dim + 2 * kv_dim, p.dim}, K::kMatrix});
  } else {
    plan.push_back({b + "attn_q.weight", {q_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "attn_k.weight", {kv_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "attn_v.weight", {kv_dim, p.dim}, K::kMatrix});
  }
  if (p.arch == "qwen3" || p.arch == "qwen3moe" || p.arch == "gemma3") {
    plan.push_back({b + "attn_q_norm.weight", {head_dim}, K::kQkNorm});
    plan.push_back({b + "attn_k_norm.weight", {head_dim}, K::kQkNorm});
  }
  if (olmo2) {
    plan.push_back({b + "attn_q_norm.weight", {q_dim}, K::kQkNorm});
    plan.push_back({b + "attn_k_norm.weight", {kv_dim}, K::kQkNorm});
  }
  if (olmo2 || gemma) {
    plan.push_back({b + "post_attention_norm.weight", {p.dim}, K::kQkNorm});
    plan.push_back({b + "post_ffw_norm.weight", {p.dim}, K::kQkNorm});
  }
  if (bias || oss) {
    plan.push_back({b + "attn_q.bias", {q_dim}, K::kBias});
    plan.push_back({b + "attn_k.bias", {kv_dim}, K::kBias});
    plan.push_back({b + "attn_v.bias", {kv_dim}, K::kBias});
  }
  plan.push_back({b + "attn_output.weight", {p.dim, q_dim}, K::kMatrix});
  if (oss) {  // W_o's bias, the sinks, and the FFN's input norm under gpt-oss's name
    plan.push_back({b + "attn_output.bias", {p.dim}, K::kBias});
    plan.push_back({b + "attn_sinks.weight", {p.n_heads}, K::kSink});
    plan.push_back({b + "post_attention_norm.weight", {p.dim}, K::kQkNorm});
  } else if (!olmo2) {
    plan.push_back({b + "ffn_norm.weight", {p.dim}, gemma ? K::kQkNorm : K::kNorm});
  }
  if (p.n_expert > 0) {
    const int64_t E = p.n_expert;
    PlanExperts(p, b, plan);
    if (oss) {  // gpt-oss's router and expert biases (ggml ne [ffn, E] = shape [E, ffn])
      plan.push_back({b + "ffn_gate_inp.bias", {E}, K::kBias});
      plan.push_back({b + "ffn_gate_exps.bias", {E, p.ffn_dim}, K::kBias});
      plan.push_back({b + "ffn_up_exps.bias", {E, p.ffn_dim}, K::kBias});
      plan.push_back({b + "ffn_down_exps.bias", {E, p.dim}, K::kBias});
    }
    if (p.shared_ffn_dim > 0) {
      plan.push_back({b + "ffn_gate_inp_shexp.weight", {p.dim}, K::kRouter});
      plan.push_back({b + "ffn_gate_shexp.weight", {p.shared_ffn_dim, p.dim}, K::kMatrix});
      plan.push_back({b + "ffn_up_shexp.weight", {p.shared_ffn_dim, p.dim}, K::kMatrix});
      plan.push_back({b + "ffn_down_shexp.weight", {p.dim, p.shared_ffn_dim}, K::kMatrix});
    }
  } else if (phi3) {
    plan.push_back({b + "ffn_up.weight", {2 * p.ffn_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "ffn_down.weight", {p.dim, p.ffn_dim}, K::kMatrix});
  } else {
    plan.push_back({b + "ffn_gate.weight", {p.ffn_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "ffn_up.weight", {p.ffn_dim, p.dim}, K::kMatrix});
    plan.push_back({b + "ffn_down.weight", {p.dim, p.ffn_dim}, K::kMatrix});
  }
}

// Every tensor of preset p, in the order llama.cpp's converters write them.
std::vector<PlannedTensor> PlanTensors(const ModelPreset& p) {
  using K = PlannedTensor::Kind;
  std::vector<PlannedTensor> plan = {{"token_embd.weight", {p.n_vocab, p.dim}, K::kMatrix}};
  if (p.n_ctx_orig > 0 && p.yarn_factor == 0) {
    plan.push_back({"rope_factors_long.weight", {p.RotDim() / 2}, K::kRopeLong});
    plan.push_back({"rope_factors_short.weight", {p.RotDim() / 2}, K::kRopeShort});
  }
  for (int32_t l = 0; l < p.n_layers; ++l) PlanLayer(p, l, plan);
  plan.push_back({"output_norm.weight", {p.dim}, K::kNorm});
  if (!p.tied_embeddings) plan.push_back({"output.weight", {p.n_vocab, p.dim}, K::kMatrix});
  return plan;
}

// One row of t's values (row: [cols]) from its seed.
void FillRow(const PlannedTensor& t, const SyntheticModelOptions& options, uint64_t seed, float* row,
             int64_t cols) {
  using K = PlannedTensor::Kind;
  if (t.kind == K::kNorm) {
    std::fill(row, row + cols, 1.0f);
  } else if (t.kind == K::kQkNorm) {
    FillNormal(row, cols, options.qk_norm_stddev, seed);
    for (float& v : std::span<float>(row, static_cast<size_t>(cols))) v += 1.0f;
  } else if (t.kind == K::kSink) {
    FillNormal(row, cols, 2.0f, seed);
  } else if (t.kind == K::kRopeShort || t.kind == K::kRopeLong) {
    FillNormal(row, cols, t.kind == K::kRopeLong ? 1.0f : 0.2f, seed);
    for (float& v : std::span<float>(row, static_cast<size_t>(cols))) v = std::exp(std::fabs(v));
  } else {
    // Router rows ~ N(0, (2/sqrt(cols))^2): logits of a normalized input then have a spread
    // of about 2, so routing is decisive rather than near-uniform at any width.
    const float sd = t.kind == K::kRouter ? 2.0f / std::sqrt(static_cast<float>(cols))
                     : t.kind == K::kBias ? options.bias_stddev
                                          : options.stddev;
    FillNormal(row, cols, sd, seed);
  }
}

}  // namespace

const std::vector<ModelPreset>& ModelPresets() {
  return kPresets;
}

std::vector<DType> SyntheticModelTypes() {
  return {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,   DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
          DType::kQ5_1, DType::kQ4_K, DType::kQ6_K, DType::kI4G128, DType::kI8,   DType::kMXFP4};
}

Status WriteSyntheticModel(const std::string& path, const SyntheticModelOptions& options) {
  FERRY_ASSIGN_OR_RETURN(const ModelPreset* preset, FindPreset(options));
  const ModelPreset& p = *preset;
  const bool w8a8 = options.type == DType::kI8;
  const Metadata md = PresetMetadata(p, options);
  using K = PlannedTensor::Kind;
  const std::vector<PlannedTensor> plan = PlanTensors(p);

  // Every tensor's type first (the header lists them all), then each one made and written in
  // turn: memory holds one tensor, not the model.
  std::vector<DType> types;                    // [plan]
  std::vector<formats::GgufTensorInfo> infos;  // plan's tensors, each W8A8 matrix followed by its scales
  for (const PlannedTensor& t : plan) {
    // int4_g128 needs rows of whole 128-element groups (e.g. tinyllama-1.1b, not smollm-135m).
    if (t.kind == K::kMatrix && t.shape.back() % Traits(options.type).block_size != 0)
      return InvalidArgumentError("preset '{}' has rows of {} elements, not a multiple of {}'s block of {}",
                                  p.name, t.shape.back(), DTypeName(options.type),
                                  Traits(options.type).block_size);
    DType type = t.kind != K::kMatrix ? DType::kF32
                 : options.q4_k_m     ? MatrixTypeQ4_K_M(t.name, p.tied_embeddings, p.n_layers)
                                      : options.type;
    if (type == DType::kMXFP4 && !t.name.ends_with("_exps.weight"))
      type = DType::kQ8_0;  // MXFP4_MOE: experts only
    // W8A8 files: block linears int8 + scales; embeddings and lm_head stay q8_0.
    const bool w8a8_matrix =
        w8a8 && type == DType::kI8 && t.name.rfind("blk.", 0) == 0 && t.shape.size() == 2;
    if (w8a8 && type == DType::kI8 && !w8a8_matrix) type = DType::kQ8_0;
    types.push_back(type);
    infos.push_back({t.name, type, t.shape});
    if (w8a8_matrix) {
      infos.push_back({t.name + "_scale", DType::kF32, {t.shape[0]}});
      if (options.w8a8_input_scale > 0.f) {
        const std::string stem = t.name.substr(0, t.name.size() - std::string(".weight").size());
        infos.push_back({stem + ".input_scale", DType::kF32, {1}});
      }
    }
  }
  formats::GgufWriteOptions wopts;
  wopts.show_progress = options.show_progress;
  wopts.progress_label = "making " + p.name;
  FERRY_ASSIGN_OR_RETURN(formats::GgufStreamWriter writer,
                         formats::GgufStreamWriter::Create(path, md, std::move(infos), wopts));
  ThreadPool pool(options.threads);
  std::vector<uint8_t> storage;  // the tensor being made: [rows, row_bytes]
  std::vector<float> scales;     // [rows] of a W8A8 matrix
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const PlannedTensor& t = plan[ti];
    const DType type = types[ti];
    const bool w8a8_matrix = type == DType::kI8;
    int64_t rows = 1;  // every dim but the innermost
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
    const int64_t cols = t.shape.back();
    const size_t row_bytes = RowBytes(type, cols);
    storage.resize(row_bytes * static_cast<size_t>(rows));
    if (w8a8_matrix) scales.resize(static_cast<size_t>(rows));
    uint8_t* dst = storage.data();
    pool.ParallelFor(rows, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(cols));  // [cols]
      for (int64_t r = r0; r < r1; ++r) {
        const uint64_t seed = options.seed ^ (ti << 40) ^ static_cast<uint64_t>(r) * 0x9E37ull;
        FillRow(t, options, seed, row.data(), cols);
        if (w8a8_matrix) {
          scales[static_cast<size_t>(r)] = QuantizeRowInt8(
              row.data(), cols, reinterpret_cast<int8_t*>(dst + row_bytes * static_cast<size_t>(r)));
        } else {
          kernels::QuantizeRow(type, row.data(), dst + row_bytes * static_cast<size_t>(r), cols);
        }
      }
    });
    FERRY_RETURN_IF_ERROR(writer.Append(storage.data(), storage.size()));
    if (w8a8_matrix) {
      FERRY_RETURN_IF_ERROR(writer.Append(scales.data(), scales.size() * sizeof(float)));
      if (options.w8a8_input_scale > 0.f)
        FERRY_RETURN_IF_ERROR(writer.Append(&options.w8a8_input_scale, sizeof(float)));
    }
  }
  return writer.Finish();
}

}  // namespace ferry
