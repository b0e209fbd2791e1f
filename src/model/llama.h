// LLaMA-family decoder (Llama 2/3, TinyLlama, Mistral, SmolLM; Qwen2 = q/k/v bias + neox RoPE):
// tensor-name map, weight checks and the forward pass.
#pragma once

#include <memory>

#include "model/model.h"

namespace ferry {

StatusOr<std::unique_ptr<Model>> CreateLlamaModel(const formats::WeightSource& source, const ModelConfig& config,
                                                  const ModelOptions& options);

}  // namespace ferry
