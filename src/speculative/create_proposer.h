// The proposer a SpecConfig asks for: prompt lookup (n-gram) or a draft model.
#pragma once

#include <memory>

#include "base/status.h"
#include "speculative/draft_model_proposer.h"
#include "speculative/proposer.h"
#include "speculative/spec_config.h"

namespace ferry::spec {

// nullptr (no error) when the config does not speculate.
StatusOr<std::unique_ptr<Proposer>> CreateProposer(const SpecConfig& config, const ModelConfig& target,
                                                   const DraftKvConfig& draft_kv, ThreadPool* pool);

}  // namespace ferry::spec
