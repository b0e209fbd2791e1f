// SpecConfig: how the engine speculates (which proposer, how many draft tokens per step).
#pragma once

#include <cstdint>

#include "model/model.h"

namespace ferry::spec {

struct SpecConfig {
  int32_t num_tokens = 4;        // K: draft tokens per step (a request may ask for fewer or none)
  int32_t ngram = 0;             // > 0: prompt lookup with n-grams of up to this many tokens
  Model* draft_model = nullptr;  // a draft model (a second file or a quantized self-draft); not owned
  bool adaptive = true;          // lower K per request while its drafts are rejected
  bool enabled() const { return ngram > 0 || draft_model != nullptr; }
};

}  // namespace ferry::spec
