// Model: a decoder-only transformer that computes a ForwardBatch against a KvCache.
// Architectures register in model_registry.cc; each lives in its own file.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/sparsity_options.h"

namespace ferry {

class Model {
 public:
  virtual ~Model() = default;
  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }

  // Runs the batch: appends each token's K/V to `kv` at its position and writes the logits
  // of the tokens with want_logits (in batch order) to logits: [batch.NumLogits(), n_vocab].
  // A sequence's earlier positions must already be in `kv`. Errors on an invalid batch.
  virtual Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool) = 0;

  // Bytes of weights read per decoded token (for bandwidth figures; MoE: the k active experts).
  virtual size_t WeightBytes() const = 0;

  // Run-time sparsity switches (exact by default) and the work they skipped so far.
  const SparsityOptions& sparsity() const { return sparsity_; }
  void set_sparsity(const SparsityOptions& options) { sparsity_ = options; }
  const SparsityStats& sparsity_stats() const { return sparsity_stats_; }
  void ResetSparsityStats() { sparsity_stats_ = SparsityStats{}; }
  // Budgeted KV caches add their evictions and memory here (model/kv_budget_cache.h).
  SparsityStats& mutable_sparsity_stats() { return sparsity_stats_; }

 protected:
  ModelConfig config_;
  SparsityOptions sparsity_;
  SparsityStats sparsity_stats_;  // counters only: never changes what Forward computes
};

struct ModelOptions {
  // Repack q4_0/q8_0 matrices once at load into the kernels' interleaved layout (faster,
  // one copy of those weights in memory). false: compute them in place from the file.
  // Types that only have a packed kernel (Ferry's int4) are always packed.
  bool repack_weights = true;
  SparsityOptions sparsity = {};  // run-time sparsity (model/sparsity_options.h); default exact
};

// Builds the model for source.metadata()'s architecture. Weights not repacked stay in the
// source (zero-copy): `source` must outlive the model.
StatusOr<std::unique_ptr<Model>> CreateModel(const formats::WeightSource& source, const ModelOptions& options = {});

}  // namespace ferry
