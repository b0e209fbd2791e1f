// Hugging Face config.json -> GGUF-convention metadata (and the llama3 rope_freqs tensor, Phi-3's
// LongRoPE factor tensors).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"

namespace ferry::formats {

struct HfConfigResult {
  std::string arch;               // "llama", "qwen2"
  bool tied_embeddings = false;   // tie_word_embeddings
  std::vector<float> rope_freqs;  // [rot_dim / 2] llama3 divisors; empty when none
  // [rot_dim / 2] Phi-3 LongRoPE divisors (rope_scaling long_factor / short_factor), written as
  // llama.cpp's rope_factors_long.weight / rope_factors_short.weight; empty when none.
  std::vector<float> rope_factors_long, rope_factors_short;
  float norm_shift = 0.0f;        // added to every norm weight at load (gemma: 1, its 1 + w)
};

// Fills `meta` from a parsed config.json. `path` names the file in errors; `default_name`
// is used for general.name when the config has no _name_or_path.
Status HfConfigToMetadata(const nlohmann::json& config, const std::string& path,
                          const std::string& default_name, Metadata* meta, HfConfigResult* result);

// llama.cpp's convert_hf_to_gguf.py llama3 rope factors: per frequency pair, the divisor of
// theta (1 for high frequencies, `factor` for low ones, smoothly blended in between).
std::vector<float> Llama3RopeFactors(double rope_theta, int64_t rot_dim, double factor,
                                     double low_freq_factor, double high_freq_factor,
                                     double original_context);

}  // namespace ferry::formats
