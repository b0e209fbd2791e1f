#include "engine/model_runner.h"

#include <span>

#include "sampling/logprobs.h"

namespace ferry {

StatusOr<RunnerOutput> ModelRunner::Execute(const SchedulerOutput& out) {
  for (const kv::BlockCopy& c : out.block_copies) cache_.CopyBlock(c.src, c.dst);
  batch_.Clear();
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    const Request& r = *s.req;
    const int32_t slot = static_cast<int32_t>(i);
    cache_.SetBlockTable(slot, r.kv.blocks());
    const int32_t end = r.num_computed + s.num_tokens;
    for (int32_t p = r.num_computed; p < end; ++p)
      batch_.Add(r.tokens[static_cast<size_t>(p)], p, slot, p + 1 == end && s.WantsLogits());
  }
  const int32_t n_vocab = model_.config().n_vocab;
  logits_.resize(static_cast<size_t>(batch_.NumLogits()) * static_cast<size_t>(n_vocab));
  FERRY_RETURN_IF_ERROR(model_.Forward(batch_, cache_, logits_.data(), pool_));

  RunnerOutput result;
  result.sampled.resize(out.scheduled.size());
  result.logprobs.resize(out.scheduled.size());
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    if (!out.scheduled[i].WantsLogits()) continue;
    Request& r = *out.scheduled[i].req;
    float* logits = logits_.data() + row++ * static_cast<size_t>(n_vocab);
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
      std::vector<float> copy(row_);
      result.sampled[i].push_back(s.Sample(copy.data(), history));
    }
    if (want_logprobs)
      for (int32_t token : result.sampled[i])
        result.logprobs[i].push_back(ComputeLogprobs(row_.data(), n_vocab, token, r.options.logprobs));
  }
  return result;
}

}  // namespace ferry
