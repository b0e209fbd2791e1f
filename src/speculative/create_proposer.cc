#include "speculative/create_proposer.h"

#include "speculative/ngram_proposer.h"

namespace ferry::spec {

StatusOr<std::unique_ptr<Proposer>> CreateProposer(const SpecConfig& config, const ModelConfig& target,
                                                   const DraftKvConfig& draft_kv, ThreadPool* pool) {
  if (!config.enabled()) return std::unique_ptr<Proposer>();
  if (config.num_tokens < 1 || config.num_tokens > 32)
    return InvalidArgumentError("--spec-tokens must be in [1, 32], got {}", config.num_tokens);
  if (config.ngram > 0 && config.draft_model)
    return InvalidArgumentError(
        "choose one kind of speculation: --spec-ngram or a draft model (--draft-model / --draft-quant)");
  if (config.ngram > 0) return std::unique_ptr<Proposer>(std::make_unique<NgramProposer>(config.ngram));
  FERRY_ASSIGN_OR_RETURN(auto p,
                         DraftModelProposer::Create(*config.draft_model, target.n_vocab, draft_kv, pool));
  return std::unique_ptr<Proposer>(std::move(p));
}

}  // namespace ferry::spec
