#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/mean_error.h"
#include "model/forward_batch.h"
#include "model/kv_budget_cache.h"

namespace ferry {

StatusOr<PerplexityResult> Perplexity(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& tokens,
                                      const PerplexityOptions& options) {
  const int32_t bos = lm.tokenizer->add_bos() ? lm.tokenizer->bos_id() : -1;
  return Perplexity(*lm.model, bos, pool, tokens, options);
}

StatusOr<PerplexityResult> Perplexity(const Model& model, int32_t bos, ThreadPool& pool,
                                      const std::vector<int32_t>& tokens, const PerplexityOptions& options) {
  const ModelConfig& cfg = model.config();
  const int32_t n_ctx = options.n_ctx;
  if (n_ctx < 4) return InvalidArgumentError("--ctx {} is too small (at least 4)", n_ctx);
  const int32_t n_batch = std::min(options.n_batch, n_ctx);
  if (n_batch <= 0) return InvalidArgumentError("--batch must be positive");
  int32_t n_chunks = static_cast<int32_t>(tokens.size() / static_cast<size_t>(n_ctx));
  if (options.max_chunks >= 0) n_chunks = std::min(n_chunks, options.max_chunks);
  if (n_chunks == 0)
    return InvalidArgumentError("the text has {} tokens, fewer than one window of --ctx {}", tokens.size(),
                                n_ctx);
  // Contiguous, or budgeted under --kv-policy sink|h2o (eviction between passes of n_batch).
  PerplexityResult r;
  FERRY_ASSIGN_OR_RETURN(
      std::unique_ptr<KvCache> kv,
      CreateKvCacheFor(cfg, model.sparsity(), 1, n_ctx, n_batch, &r.sparsity, options.kv_types));
  ForwardScratch scratch;
  ForwardOptions fo;
  fo.stats = &r.sparsity;
  fo.taps = options.taps;
  fo.scratch = &scratch;
  const int32_t first = n_ctx / 2;  // positions first..n_ctx-2 predict first+1..n_ctx-1
  std::vector<float> logits(static_cast<size_t>(n_batch) * cfg.n_vocab);  // [n_batch, n_vocab]
  ForwardBatch batch;
  double nll = 0, nll2 = 0;
  int64_t count = 0;

  for (int32_t chunk = 0; chunk < n_chunks; ++chunk) {
    const size_t start = static_cast<size_t>(chunk) * n_ctx;
    for (int32_t b0 = 0; b0 < n_ctx; b0 += n_batch) {
      const int32_t b1 = std::min(n_ctx, b0 + n_batch);
      batch.Clear();
      for (int32_t p = b0; p < b1; ++p) {
        int32_t t = tokens[start + static_cast<size_t>(p)];
        if (p == 0 && bos >= 0) t = bos;
        batch.Add(t, p, 0, p >= first && p < n_ctx - 1);
      }
      FERRY_RETURN_IF_ERROR(model.Forward(batch, *kv, logits.data(), &pool, fo));
      if (options.on_scored_rows) {
        const int32_t p0 = std::max(b0, first), p1 = std::min(b1, n_ctx - 1);
        if (p1 > p0)
          FERRY_RETURN_IF_ERROR(options.on_scored_rows(logits.data(), p1 - p0, &tokens[start + p0 + 1]));
      }
      int32_t row = 0;
      for (int32_t p = b0; p < b1; ++p) {
        if (!(p >= first && p < n_ctx - 1)) continue;
        const float* l = logits.data() + static_cast<size_t>(row++) * cfg.n_vocab;
        const int32_t target = tokens[start + static_cast<size_t>(p) + 1];
        float mx = *std::max_element(l, l + cfg.n_vocab);
        double sum_exp = 0;
        for (int32_t j = 0; j < cfg.n_vocab; ++j) sum_exp += std::exp(l[j] - mx);
        double log_prob = l[target] - mx - std::log(sum_exp);
        nll -= log_prob;
        nll2 += log_prob * log_prob;
        ++count;
      }
    }
    if (options.progress) options.progress(chunk + 1, n_chunks, std::exp(nll / static_cast<double>(count)));
  }
  r.n_chunks = n_chunks;
  r.n_scored = count;
  const MeanAndError nll_mean = MeanOf(nll, nll2, count);
  r.ppl = std::exp(nll_mean.mean);
  r.ppl_stderr = nll_mean.error * r.ppl;
  return r;
}

}  // namespace ferry
