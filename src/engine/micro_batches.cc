#include "engine/micro_batches.h"

#include <algorithm>

namespace ferry {

std::vector<int32_t> PlanMicroBatches(int32_t n_tokens, int stages, const MicroBatchConfig& config) {
  int32_t count = 1;
  if (stages > 1 && n_tokens > 0)
    count = std::clamp(n_tokens / std::max(1, config.min_tokens), 1, std::max(1, config.max_count));
  std::vector<int32_t> cuts(static_cast<size_t>(count) + 1);
  for (int32_t j = 0; j <= count; ++j)  // the first n mod count ranges one token longer
    cuts[static_cast<size_t>(j)] = j * (n_tokens / count) + std::min(j, n_tokens % count);
  return cuts;
}

Status PipelinedForward::Run(const Model& model, const ForwardBatch& batch, const std::vector<int32_t>& cuts,
                             KvCache& kv, float* logits, ThreadPool* pool, const ForwardOptions& options) {
  if (cuts.size() < 2 || cuts.front() != 0 || cuts.back() != batch.size() ||
      !std::is_sorted(cuts.begin(), cuts.end()))
    return InternalError("micro-batch cuts do not cover the batch of {} tokens", batch.size());
  if (cuts.size() == 2) return model.Forward(batch, kv, logits, pool, options);
  if (options.hidden)
    return UnsupportedError("hidden states (embeddings) are not computed over pipeline micro-batches");
  const size_t n_vocab = static_cast<size_t>(model.config().n_vocab);
  const size_t count = cuts.size() - 1;
  parts_.resize(count);
  std::vector<size_t> rows(count + 1, 0);  // [count + 1] each part's first logits row
  for (size_t j = 0; j < count; ++j) {
    ForwardBatch& part = parts_[j];
    part.Clear();
    for (int32_t i = cuts[j]; i < cuts[j + 1]; ++i) {
      const size_t t = static_cast<size_t>(i);
      part.Add(batch.tokens[t], batch.positions[t], batch.seq_ids[t], batch.want_logits[t] != 0,
               batch.LogitsTopK(t));
    }
    rows[j + 1] = rows[j] + static_cast<size_t>(part.NumLogits());
  }
  ForwardOptions deferred = options;
  deferred.defer_stage_logits = true;
  for (size_t j = 0; j < count; ++j)
    FERRY_RETURN_IF_ERROR(model.Forward(parts_[j], kv, logits + rows[j] * n_vocab, pool, deferred));
  // The parts' rows in order are the batch's: one message for all of them.
  return model.ShareStageLogits(batch, logits, options.scratch, options.logits_gathered_bytes);
}

}  // namespace ferry
