// Architecture name -> factory. One line per architecture; no switch inside the forward pass.
#include <string_view>

#include "model/llama.h"
#include "model/model.h"

namespace ferry {
namespace {

using Factory = StatusOr<std::unique_ptr<Model>> (*)(const formats::WeightSource&, const ModelConfig&,
                                                     const ModelOptions&);
struct Entry {
  std::string_view arch;
  Factory create;
};
// qwen2 differs from llama only in q/k/v biases and neox RoPE, both read from the file.
constexpr Entry kArchitectures[] = {
    {"llama", &CreateLlamaModel},
    {"qwen2", &CreateLlamaModel},
    {"qwen2moe", &CreateLlamaModel},  // qwen2 attention + MoE FFN with a shared expert (model/moe.h)
    // The rest differ from llama only by ModelConfig flags the one forward pass reads:
    {"qwen3", &CreateLlamaModel},     // per-head q/k RMSNorm before RoPE (qk_norm), no biases
    {"qwen3moe", &CreateLlamaModel},  // qwen3 attention + routed experts, no shared expert
    {"granite", &CreateLlamaModel},   // embedding / attention / residual / logit multipliers
    {"smollm3", &CreateLlamaModel},   // no RoPE on every 4th layer (nope_layers)
    {"olmo2", &CreateLlamaModel},     // post norms only, q/k norms over the whole projection
    {"gemma2", &CreateLlamaModel},    // pre+post norms, GeGLU, soft-capping, sliding-window layers
    {"gemma3", &CreateLlamaModel},    // gemma2 without soft-capping, with q/k norms, 5:1 sliding layers
    {"phi3", &CreateLlamaModel},      // fused qkv / gate_up, partial rotary, LongRoPE factors
    {"gpt-oss",
     &CreateLlamaModel},  // sinks, biases, alternating sliding layers, YaRN, clamped-SwiGLU experts
    {"deepseek2", &CreateLlamaModel},  // latent attention (IsMla), leading dense layers, shared experts
};

}  // namespace

StatusOr<std::unique_ptr<Model>> CreateModel(const formats::WeightSource& source,
                                             const ModelOptions& options) {
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromMetadata(source.metadata()));
  for (const Entry& e : kArchitectures)
    if (e.arch == config.arch) return e.create(source, config, options);
  return UnsupportedError("'{}': architecture '{}' is not supported", source.path(), config.arch);
}

}  // namespace ferry
