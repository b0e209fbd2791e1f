#include "engine/generator.h"

#include <algorithm>

#include "base/timer.h"
#include "engine/stop_matcher.h"
#include "model/forward_batch.h"
#include "model/kv_budget_cache.h"

namespace ferry {

int32_t EffectiveContext(const ModelConfig& config, int32_t requested) {
  return requested > 0 ? requested : std::min(config.n_ctx_train, 4096);
}

StatusOr<GenerateStats> Generate(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& prompt,
                                 const GenerateOptions& options, const TextSink& sink,
                                 std::vector<int32_t>* out_ids) {
  const ModelConfig& cfg = lm.config();
  const Tokenizer& tok = *lm.tokenizer;
  const int32_t n_ctx = EffectiveContext(cfg, options.n_ctx);
  if (prompt.empty()) return InvalidArgumentError("the prompt is empty (no tokens)");
  if (static_cast<int32_t>(prompt.size()) >= n_ctx)
    return OutOfRangeError("the prompt has {} tokens but the context holds {}; shorten it or raise --ctx",
                           prompt.size(), n_ctx);
  if (options.n_batch <= 0) return InvalidArgumentError("--batch must be positive");
  // Contiguous, or budgeted (bounded memory) under --kv-policy sink|h2o.
  const SparsityOptions& sparsity = options.sparsity ? *options.sparsity : lm.model->sparsity();
  GenerateStats stats;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> kv,
                         CreateKvCacheFor(cfg, sparsity, 1, n_ctx, options.n_batch, &stats.sparsity, options.kv_types));
  ForwardScratch scratch;
  ForwardOptions fo;
  fo.sparsity = &sparsity;
  fo.stats = &stats.sparsity;
  fo.scratch = &scratch;
  stats.prompt_tokens = static_cast<int32_t>(prompt.size());
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));  // [n_vocab]
  std::vector<int32_t> history(prompt);
  Sampler sampler(options.sampling, cfg.n_vocab);
  IncrementalDetokenizer detok(tok);
  StopMatcher stops(options.stop);
  ForwardBatch batch;
  Timer timer;

  // Prefill in chunks; logits only for the last prompt token. A split head gathers of each row
  // only what the sampler needs (ForwardBatch::logits_top_k).
  const int32_t top_k = LogitsTopKNeeded(options.sampling);
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(options.n_batch)) {
    size_t end = std::min(prompt.size(), start + static_cast<size_t>(options.n_batch));
    batch.Clear();
    for (size_t i = start; i < end; ++i)
      batch.Add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size(), top_k);
    FERRY_RETURN_IF_ERROR(lm.model->Forward(batch, *kv, logits.data(), &pool, fo));
  }
  stats.prefill_s = timer.Seconds();

  int32_t pos = static_cast<int32_t>(prompt.size());
  stats.finish_reason = "length";
  Timer decode_timer;
  for (int32_t i = 0; options.n_predict < 0 || i < options.n_predict; ++i) {
    int32_t id = sampler.Sample(logits.data(), history);
    if (i == 0) {
      stats.ttft_s = timer.Seconds();
      decode_timer.Reset();
    }
    if (tok.IsEog(id) && !options.ignore_eos) {
      stats.finish_reason = "stop";
      break;
    }
    history.push_back(id);
    if (out_ids) out_ids->push_back(id);
    ++stats.generated_tokens;
    std::string text = stops.Push(detok.Push(id));
    if (!text.empty()) sink(text);
    if (stops.stopped()) {
      stats.finish_reason = "stop";
      break;
    }
    if (pos >= n_ctx) break;                                          // context full
    if (options.n_predict >= 0 && i + 1 >= options.n_predict) break;  // no forward for an unused token
    batch.Clear();
    batch.Add(id, pos++, 0, true, top_k);
    FERRY_RETURN_IF_ERROR(lm.model->Forward(batch, *kv, logits.data(), &pool, fo));
  }
  if (!stops.stopped()) {
    std::string rest = stops.Push(detok.Flush());
    rest += stops.Flush();
    if (!rest.empty()) sink(rest);
  }
  if (stats.generated_tokens > 0) stats.decode_s = decode_timer.Seconds();
  return stats;
}

}  // namespace ferry
