// Model: a decoder-only transformer that computes a ForwardBatch against a KvCache.
// Architectures register in model_registry.cc; each lives in its own file.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"
#include "model/activation_taps.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/parallel.h"
#include "model/scratch.h"
#include "model/sparsity_options.h"

namespace ferry {

// What one Forward call may vary; the model itself is immutable after load, so two callers
// (engines, generators, tools) sharing one model cannot change each other's results.
struct ForwardOptions {
  // Run-time sparsity; null: the options the model was loaded with. Head pruning and FFN
  // sparsity need structures built at load, so they must match what the model was loaded with.
  const SparsityOptions* sparsity = nullptr;
  SparsityStats* stats = nullptr;        // the work skipped is added here; null: not counted
  const ActivationTaps* taps = nullptr;  // offline tools: see/replace linear inputs (unfused path)
  ForwardScratch* scratch = nullptr;     // reused buffers; null: allocated for this call
  // [batch.size(), dim] when set: every token's final hidden state (after the output norm,
  // before the LM head), for embeddings. Only models whose WritesHidden() is true fill it.
  float* hidden = nullptr;
  // Vocabulary split over tensor ranks: the bytes the output head's all-gather assembles on this
  // rank (every rank's whole rows and top-k candidates, its own included; ForwardBatch::
  // logits_top_k) are added here.
  uint64_t* logits_gathered_bytes = nullptr;
  // Pipeline split: the last stage leaves the logits in `logits` and the other stages return
  // without them, so that a stage can go on to the next micro-batch instead of waiting for
  // this one's logits; the caller then calls ShareStageLogits with the same batch on every stage.
  bool defer_stage_logits = false;
};

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
  virtual Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool,
                         const ForwardOptions& options) const = 0;
  Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool) const {
    return Forward(batch, kv, logits, pool, ForwardOptions{});
  }

  // Stages of a pipeline split (1: none; model/parallel.h), and this rank's stage's layers
  // (the only ones whose KV it computes; all of them unsplit).
  virtual int pipeline_stages() const { return 1; }
  virtual StageLayers stage_layers() const { return {0, config_.n_layers}; }
  // After a Forward with defer_stage_logits: the last stage's logits of `batch` to every stage
  // (whole rows, or each row's largest where logits_top_k asks for only those, as Forward
  // does); the bytes sent are added to *sent_bytes. Nothing without a pipeline split.
  virtual Status ShareStageLogits(const ForwardBatch& batch, float* logits, ForwardScratch* scratch,
                                  uint64_t* sent_bytes) const {
    (void)batch, (void)logits, (void)scratch, (void)sent_bytes;
    return Status::Ok();
  }

  // Whether Forward fills ForwardOptions::hidden (callers refuse embeddings otherwise).
  virtual bool WritesHidden() const { return false; }

  // Bytes of weights read per decoded token (for bandwidth figures; MoE: the k active experts).
  virtual size_t WeightBytes() const = 0;

  // The run-time sparsity the model was loaded with (ModelOptions::sparsity; exact by default).
  const SparsityOptions& sparsity() const { return sparsity_; }

 protected:
  ModelConfig config_;
  SparsityOptions sparsity_;
};

struct ModelOptions {
  // Repack q4_0/q8_0 matrices once at load into the kernels' interleaved layout (faster,
  // one copy of those weights in memory). false: compute them in place from the file.
  // Types that only have a packed kernel (Ferry's int4) are always packed.
  bool repack_weights = true;
  SparsityOptions sparsity = {};  // run-time sparsity (model/sparsity_options.h); default exact
  // Tensor/pipeline split over processes (model/parallel.h); default: the whole model here.
  // Split, config() reports this rank's share: n_heads, n_kv_heads (what its KV cache holds)
  // and ffn_dim are the shard's, and Forward still returns the logits on every rank (whole rows,
  // or the largest ones where ForwardBatch::logits_top_k asks for only those).
  ParallelLayout parallel = {};
  // GeGLU (gemma): false reads ggml's fp16 GELU table (kernels::GeluFp16TableMul), so a GGUF
  // computes what llama.cpp computes from it; true: the tanh GELU in f32 (kernels::GeluTanhMul,
  // as transformers computes it in f32).
  bool exact_gelu = false;
};

// Builds the model for source.metadata()'s architecture. Weights not repacked stay in the
// source (zero-copy): `source` must outlive the model.
StatusOr<std::unique_ptr<Model>> CreateModel(const formats::WeightSource& source,
                                             const ModelOptions& options = {});

}  // namespace ferry
