// ModelRunner: the one place scheduling decisions become tensors. It applies block copies,
// points each batch slot at its request's block table, runs Model::Forward over the flat
// batch against the PagedKvCache, and samples each request that reached its end with that
// request's own Sampler. Requests with drafts get their drafts scored in the same pass and
// verified (greedy: exactly the target's choices; sampled: speculative rejection sampling).
// With a KV budget, a request's new tokens go after its kept ones and, at an eviction point,
// the pass is followed by the policy's eviction and the compaction of its rows.
#pragma once

#include <optional>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "engine/follower.h"
#include "engine/micro_batches.h"
#include "engine/scheduler.h"
#include "model/forward_batch.h"
#include "model/kv_budget_policy.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"
#include "speculative/verifier.h"

namespace ferry {

class ModelRunner {
 public:
  // budget: the engine's KV budget (nullopt: every sequence keeps every token).
  // sparsity: the run-time options every step runs with.
  // micro_batches: how a step is cut when the model is split into pipeline stages.
  ModelRunner(const Model& model, PagedKvCache& cache, ThreadPool* pool, const SparsityOptions& sparsity,
              std::optional<KvBudgetConfig> budget = {}, const MicroBatchConfig& micro_batches = {})
      : model_(model),
        cache_(cache),
        pool_(pool),
        sparsity_(sparsity),
        budget_(budget),
        micro_batches_(micro_batches) {}
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Every step is sent to the leader's followers before this rank's forward (null: none).
  void LeadFollowers(StepLeader* leader) { leader_ = leader; }

  StatusOr<RunnerOutput> Execute(const SchedulerOutput& out);
  // How many of the largest logits r's samplers need of its sampled row (ForwardBatch::
  // logits_top_k; 0: the whole row, as logprobs need), so that a vocabulary-split head gathers
  // only those. Rows with drafts and scored prompt rows are whole regardless.
  static int32_t SampleTopK(const Request& r);
  // The work the model's sparsity options skipped, summed over every Execute.
  const SparsityStats& sparsity_stats() const { return stats_; }
  // Micro-batches the steps were cut into, summed over every Execute (one per step unsplit).
  int64_t micro_batches_run() const { return micro_batches_run_; }

 private:
  // Verifies r's first num_draft drafts against logits [num_draft + 1, n_vocab].
  spec::Verification Verify(Request& r, int32_t num_draft, float* logits);
  // Prompt logprobs from this step's rows of r starting at logits row `row`; returns the rows used.
  size_t ScorePrompt(Request& r, int32_t num_tokens, size_t row);

  const Model& model_;
  PagedKvCache& cache_;
  ThreadPool* pool_;
  SparsityOptions sparsity_;
  std::optional<KvBudgetConfig> budget_;
  MicroBatchConfig micro_batches_;
  PipelinedForward pipelined_;
  int64_t micro_batches_run_ = 0;
  StepLeader* leader_ = nullptr;
  StepPlan plan_;  // the step for the followers (when leading): block copies and tables
  ForwardBatch batch_;
  ForwardScratch scratch_;  // the forward pass's buffers, reused every step
  SparsityStats stats_;
  std::vector<float> logits_;     // [batch_.NumLogits(), n_vocab]
  std::vector<float> hidden_;     // [batch_.size(), dim] final hidden states (steps with embeddings)
  std::vector<int32_t> begin_;    // [scheduled] each request's first row in batch_
  std::vector<float> row_;        // [n_vocab] pristine logits for the branches of a fork
  std::vector<float> branch_;     // [n_vocab] one branch's copy of row_ (its sampler edits it)
  std::vector<float> probs_;      // [num_draft + 1, n_vocab] the target's processed distributions
  std::vector<int32_t> history_;  // tokens + drafts so far, for the penalties
};

}  // namespace ferry
