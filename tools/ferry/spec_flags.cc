// SpecFlags: the speculative-decoding flags of run/serve/bench turned into a SpecConfig.
#include "commands.h"

namespace ferry::cli {

void SpecFlags::Add(CLI::App* cmd) {
  cmd->add_option("--draft-model", draft_model,
                  "speculative decoding with this draft model (same tokenizer/vocabulary as the target)");
  cmd->add_option("--draft-quant", draft_quant,
                  "speculative decoding with the target's own weights quantized in memory: q4");
  cmd->add_option("--spec-ngram", spec_ngram,
                  "speculative decoding by prompt lookup: match the last N tokens in the prompt and output")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--spec-tokens", spec_tokens, "draft tokens per step (K)")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  cmd->add_flag("--spec-fixed-k", no_adaptive, "keep K fixed (default: lower K while drafts are rejected)");
}

Status SpecFlags::Apply(const LoadedModel& target, const LoadOptions& load, ThreadPool* pool,
                        SpecDraft& draft, spec::SpecConfig& config) const {
  const int kinds = (draft_model.empty() ? 0 : 1) + (draft_quant.empty() ? 0 : 1) + (spec_ngram > 0 ? 1 : 0);
  if (kinds > 1) return InvalidArgumentError("choose one of --draft-model, --draft-quant and --spec-ngram");
  config.num_tokens = spec_tokens;
  config.adaptive = !no_adaptive;
  config.ngram = spec_ngram;
  if (!draft_model.empty()) {
    LoadOptions o = load;
    o.tokenizer_path.clear();
    auto lm = LoadModel(draft_model, o);
    if (!lm.ok()) return Status(lm.status().code(), "--draft-model: " + lm.status().message());
    if (lm->config().n_vocab != target.config().n_vocab)
      return InvalidArgumentError(
          "--draft-model '{}' has {} vocabulary entries but the target has {}; the draft must use the "
          "target's "
          "tokenizer (or use --draft-quant q4)",
          draft_model, lm->config().n_vocab, target.config().n_vocab);
    draft.model.emplace(std::move(*lm));
    config.draft_model = draft.model->model.get();
  }
  if (!draft_quant.empty()) {
    if (draft_quant != "q4" && draft_quant != "q4_0")
      return InvalidArgumentError("--draft-quant must be q4 (got '{}')", draft_quant);
    auto q = spec::MakeQuantizedDraft(*target.source, DType::kQ4_0, pool);
    if (!q.ok()) return Status(q.status().code(), "--draft-quant: " + q.status().message());
    draft.quantized.emplace(std::move(*q));
    config.draft_model = draft.quantized->model.get();
  }
  return Status::Ok();
}

}  // namespace ferry::cli
