// ModelRunner: the one place scheduling decisions become tensors. It applies block copies,
// points each batch slot at its request's block table, runs Model::Forward over the flat
// batch against the PagedKvCache, and samples each request that reached its end with that
// request's own Sampler.
#pragma once

#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"

namespace ferry {

class ModelRunner {
 public:
  ModelRunner(Model& model, PagedKvCache& cache, ThreadPool* pool) : model_(model), cache_(cache), pool_(pool) {}
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  StatusOr<RunnerOutput> Execute(const SchedulerOutput& out);

 private:
  Model& model_;
  PagedKvCache& cache_;
  ThreadPool* pool_;
  ForwardBatch batch_;
  std::vector<float> logits_;  // [batch_.NumLogits(), n_vocab]
  std::vector<float> row_;     // [n_vocab] pristine logits for the branches of a fork
};

}  // namespace ferry
