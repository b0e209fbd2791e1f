#include "engine/model_runner.h"

#include <algorithm>
#include <span>

#include "base/check.h"
#include "sampling/logprobs.h"
#include "speculative/verifier.h"

namespace ferry {

StatusOr<RunnerOutput> ModelRunner::Execute(const SchedulerOutput& out) {
  for (const kv::BlockCopy& c : out.block_copies) cache_.CopyBlock(c.src, c.dst);
  if (leader_) {  // the followers apply the same copies and tables to their KV shards
    plan_.block_copies.clear();
    for (const kv::BlockCopy& c : out.block_copies) plan_.block_copies.emplace_back(c.src, c.dst);
    const int32_t groups = cache_.groups().num_groups();
    plan_.num_groups = groups;
    plan_.block_tables.resize(out.scheduled.size() * static_cast<size_t>(groups));
    for (size_t i = 0; i < out.scheduled.size(); ++i)
      for (int32_t g = 0; g < groups; ++g) {
        const auto t = out.scheduled[i].req->kv.blocks(g);
        plan_.block_tables[i * static_cast<size_t>(groups) + static_cast<size_t>(g)].assign(t.begin(),
                                                                                            t.end());
      }
  }
  batch_.Clear();
  bool embeds = false;  // some request pools hidden states this step
  begin_.clear();
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    Request& r = *s.req;
    const int32_t slot = static_cast<int32_t>(i);
    for (int32_t g = 0; g < cache_.groups().num_groups(); ++g) cache_.SetBlockTable(slot, r.kv.blocks(g), g);
    if (budget_) {  // the new tokens take the slots after the kept ones
      const int32_t shift = r.kept.size() - r.num_computed;
      r.kept.Append(r.num_computed, s.num_tokens + s.num_draft);
      cache_.SetKeptLayout(slot, shift, budget_->policy == KvPolicy::kH2O ? r.kept.score.data() : nullptr);
    }
    const int32_t end = r.num_computed + s.num_tokens;
    embeds |= r.embeds();
    begin_.push_back(batch_.size());
    // Logits at the last position to sample from it (embeddings want hidden states, none), and
    // with prompt logprobs at every prompt position but the last (each scores the next token).
    const int32_t scored_end = r.wants_prompt_logprobs() ? std::min(end, r.num_prompt_tokens - 1) : 0;
    const int32_t sample_top_k = s.num_draft > 0 ? 0 : SampleTopK(r);
    for (int32_t p = r.num_computed; p < end; ++p) {
      const bool samples = p + 1 == end && s.WantsLogits() && !r.prefill_only();
      // Scored prompt rows need the whole row; the sampled one what its samplers need.
      batch_.Add(r.tokens[static_cast<size_t>(p)], p, slot, p < scored_end || samples,
                 p < scored_end ? 0 : sample_top_k);
    }
    // Drafts follow the last real token; the target scores every one of them in this pass.
    FERRY_CHECK(s.num_draft == 0 ||
                (s.WantsLogits() && s.num_draft <= static_cast<int32_t>(r.spec.draft.size())));
    for (int32_t j = 0; j < s.num_draft; ++j)
      batch_.Add(r.spec.draft[static_cast<size_t>(j)], end + j, slot, true);
  }
  const int32_t n_vocab = model_.config().n_vocab;
  logits_.resize(static_cast<size_t>(batch_.NumLogits()) * static_cast<size_t>(n_vocab));
  ForwardOptions fo;
  fo.sparsity = &sparsity_;
  fo.stats = &stats_;
  fo.scratch = &scratch_;
  const int32_t dim = model_.config().dim;
  if (embeds) {  // one pass gives the embeddings' hidden states and the others' logits
    hidden_.resize(static_cast<size_t>(batch_.size()) * static_cast<size_t>(dim));
    fo.hidden = hidden_.data();
  }
  // Embeddings' hidden states come from one pass over the whole batch.
  plan_.micro_batch_cuts =
      PlanMicroBatches(batch_.size(), embeds ? 1 : model_.pipeline_stages(), micro_batches_);
  micro_batches_run_ += static_cast<int64_t>(plan_.micro_batch_cuts.size()) - 1;
  if (leader_) {
    plan_.batch = batch_;
    plan_.hidden = embeds;
    FERRY_RETURN_IF_ERROR(leader_->Step(plan_));
  }
  FERRY_RETURN_IF_ERROR(
      pipelined_.Run(model_, batch_, plan_.micro_batch_cuts, cache_, logits_.data(), pool_, fo));
  for (size_t i = 0; embeds && i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    Request& r = *s.req;
    if (!r.embeds()) continue;
    for (int32_t t = 0; t < s.num_tokens; ++t)
      r.pooled.Add(r.options.pooling, r.num_computed + t,
                   hidden_.data() + static_cast<size_t>(begin_[i] + t) * static_cast<size_t>(dim), dim);
    if (s.WantsLogits()) r.embedding = r.pooled.Finish();
  }
  if (budget_)  // evict at eviction points; the scheduler returns the emptied blocks
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      const ScheduledRequest& s = out.scheduled[i];
      if (!s.evict) continue;
      Request& r = *s.req;
      for (const SlotMove& m : EvictOverBudget(r.kept, r.num_computed + s.num_tokens, *budget_))
        cache_.MoveRow(static_cast<int32_t>(i), m.from, m.to);
    }

  RunnerOutput result;
  result.sampled.resize(out.scheduled.size());
  result.logprobs.resize(out.scheduled.size());
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    Request& r = *out.scheduled[i].req;
    row += ScorePrompt(r, out.scheduled[i].num_tokens, row);
    if (!out.scheduled[i].WantsLogits() || r.prefill_only()) continue;
    float* logits = logits_.data() + row * static_cast<size_t>(n_vocab);
    if (const int32_t drafts = out.scheduled[i].num_draft; drafts > 0) {
      if (result.num_accepted.empty()) result.num_accepted.assign(out.scheduled.size(), 0);
      spec::Verification v = Verify(r, drafts, logits);
      result.sampled[i] = std::move(v.tokens);
      result.num_accepted[i] = v.num_accepted;
      row += static_cast<size_t>(drafts) + 1;
      continue;
    }
    ++row;
    std::span<const int32_t> history(r.tokens);
    const bool want_logprobs = r.options.logprobs >= 0;
    if (r.fork_samplers.empty() && !want_logprobs) {
      result.sampled[i].push_back(r.sampler.Sample(logits, history));
      continue;
    }
    // Samplers modify logits in place: keep the raw row for further branches and logprobs.
    // First sample of a request with n > 1: every branch samples the same logits.
    row_.assign(logits, logits + n_vocab);
    result.sampled[i].push_back(r.sampler.Sample(logits, history));
    for (Sampler& s : r.fork_samplers) {
      branch_.assign(row_.begin(), row_.end());
      result.sampled[i].push_back(s.Sample(branch_.data(), history));
    }
    if (want_logprobs)
      for (int32_t token : result.sampled[i])
        result.logprobs[i].push_back(ComputeLogprobs(row_.data(), n_vocab, token, r.options.logprobs));
  }
  return result;
}

int32_t ModelRunner::SampleTopK(const Request& r) {
  if (r.options.logprobs >= 0) return 0;  // logprobs normalize over the whole row
  int32_t k = LogitsTopKNeeded(r.sampler.params());
  for (const Sampler& s : r.fork_samplers) {  // the branches sample the same row
    const int32_t fk = LogitsTopKNeeded(s.params());
    k = k == 0 || fk == 0 ? 0 : std::max(k, fk);
  }
  return k;
}

size_t ModelRunner::ScorePrompt(Request& r, int32_t num_tokens, size_t row) {
  if (!r.wants_prompt_logprobs()) return 0;
  const int32_t n_vocab = model_.config().n_vocab;
  const int32_t end = std::min(r.num_computed + num_tokens, r.num_prompt_tokens - 1);
  r.prompt_logprobs.resize(static_cast<size_t>(r.num_prompt_tokens - 1));
  size_t rows = 0;
  // A recomputed prefix (after preemption) overwrites its entries with the same values.
  for (int32_t p = r.num_computed; p < end; ++p, ++rows)
    r.prompt_logprobs[static_cast<size_t>(p)] =
        ComputeLogprobs(logits_.data() + (row + rows) * static_cast<size_t>(n_vocab), n_vocab,
                        r.tokens[static_cast<size_t>(p) + 1], r.options.prompt_logprobs);
  return rows;
}

spec::Verification ModelRunner::Verify(Request& r, int32_t num_draft, float* logits) {
  const int32_t n_vocab = model_.config().n_vocab;
  const size_t nv = static_cast<size_t>(n_vocab);
  std::span<const int32_t> draft(r.spec.draft.data(), static_cast<size_t>(num_draft));
  // Row j follows the real tokens and draft[0, j): the penalties see that history, as the
  // draft's q did and as plain decoding would.
  history_.assign(r.tokens.begin(), r.tokens.end());
  if (r.sampler.greedy()) {
    std::vector<int32_t> choice;  // [num_draft + 1] the target's greedy tokens
    for (int32_t j = 0; j <= num_draft; ++j) {
      choice.push_back(r.sampler.Sample(logits + static_cast<size_t>(j) * nv, history_));  // no randomness
      if (j < num_draft) history_.push_back(draft[static_cast<size_t>(j)]);
    }
    return spec::VerifyGreedy(choice, draft);
  }
  probs_.resize(static_cast<size_t>(num_draft + 1) * nv);
  for (int32_t j = 0; j <= num_draft; ++j) {
    r.sampler.ProcessedProbs(logits + static_cast<size_t>(j) * nv, history_,
                             std::span<float>(probs_).subspan(static_cast<size_t>(j) * nv, nv));
    if (j < num_draft) history_.push_back(draft[static_cast<size_t>(j)]);
  }
  std::span<const float> q;  // empty for deterministic drafts (n-gram lookup)
  if (!r.spec.draft_probs.empty())
    q = std::span<const float>(r.spec.draft_probs).first(static_cast<size_t>(num_draft) * nv);
  return spec::VerifySampled(probs_, q, draft, n_vocab, r.sampler);
}

}  // namespace ferry
