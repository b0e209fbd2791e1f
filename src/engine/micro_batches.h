// Micro-batches for a model split into pipeline stages (docs/scaling.md): the step's flat batch
// is cut into consecutive token ranges and every stage runs them in order, each sending one
// range's residual stream on and going on to the next, so that stage s works on range j while
// stage s + 1 works on range j - 1. The logits come back from the last stage only after every
// range has left the first (Model::ShareStageLogits), so no stage waits for a range's logits
// before starting the next. A cut may fall inside one sequence's tokens: its later range
// attends over the K/V the earlier one wrote on the same stage, as a chunked prefill does.
//
// Each range re-reads the stage's weights, so ranges of few tokens cost more than the overlap
// saves (a decode step of a few sequences is one range); PlanMicroBatches takes a minimum.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace ferry {

struct MicroBatchConfig {
  int32_t min_tokens = 16;  // tokens in a micro-batch at least (but one batch is never cut below one)
  int32_t max_count = 8;    // micro-batches per step at most
};

// The cuts of an n-token batch: [count + 1] offsets from 0 to n, equal ranges as far as they
// divide. One range when the model is not split into stages (nothing to overlap).
std::vector<int32_t> PlanMicroBatches(int32_t n_tokens, int stages, const MicroBatchConfig& config);

// Runs `batch` through `model` as the micro-batches `cuts` (PlanMicroBatches) say; the same
// calls on every rank of the split, with the same batch and cuts. logits: [batch.NumLogits(),
// n_vocab] in batch order, on every stage. Holds the micro-batches' storage between steps.
class PipelinedForward {
 public:
  Status Run(const Model& model, const ForwardBatch& batch, const std::vector<int32_t>& cuts, KvCache& kv,
             float* logits, ThreadPool* pool, const ForwardOptions& options);

 private:
  std::vector<ForwardBatch> parts_;  // [micro-batches]
};

}  // namespace ferry
