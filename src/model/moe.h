// MoeFfn: the Mixture-of-Experts feed-forward of one layer (Mixtral; Qwen2-MoE with its gated
// shared expert; DeepSeek-V2 with ungated shared experts and scaled weights). A softmax router picks the
// top-k experts per token; the step's tokens are grouped by expert and each active expert runs one MatMul
// over all of its tokens (never a loop of experts per token). An optional capacity factor drops assignments
// past an expert's capacity, in token order, and counts them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"
#include "model/model_config.h"
#include "model/scratch.h"
#include "model/sparsity_options.h"

namespace ferry {

// One expert's weight matrix: [n_out, n_in] rows of `type` in the file (a slice of a 3-D
// expert tensor or its own tensor), or repacked once at load for the packed kernels.
struct ExpertMatrix {
  const void* data = nullptr;
  DType type = DType::kF32;
  int64_t n_out = 0, n_in = 0;
  size_t bytes = 0;
  // [PackedBytes] or null: a view into one buffer holding the same projection of every expert
  // of the layer (model/moe.cc PackExperts), which owns it.
  std::shared_ptr<const uint8_t> packed;

  // y: [n_tok, n_out] = x: [n_tok, n_in] @ W^T
  void Apply(const float* x, int64_t n_tok, float* y, ThreadPool* pool) const;
};

// The routing of one token: its k experts by decreasing router probability (ties: lower index
// first) and their mixing weights (renormalized to sum 1 when the config says so).
struct TokenRoute {
  std::vector<int32_t> expert;  // [k]
  std::vector<float> weight;    // [k]
};
// Softmax over logits: [n_expert], then top-k. The reference the grouped path must match.
// softmax_after_topk (gpt-oss): the top k of the logits themselves, weighted by a softmax over
// those k logits alone (normalize is then moot: the weights already sum to 1).
TokenRoute RouteToken(const float* logits, int32_t n_expert, int32_t k, bool normalize,
                      bool softmax_after_topk = false);

// Capacity of each expert for a step of n_tokens: ceil(k * factor * n_tokens / n_expert);
// factor <= 0 means unlimited (returns INT64_MAX).
int64_t ExpertCapacity(int32_t k, double factor, int64_t n_tokens, int32_t n_expert);

// A tensor-parallel rank's share of every expert (Megatron, as the dense FFN): gate/up rows and
// down columns [rank * ffn / size, (rank + 1) * ffn / size), the same for the shared expert; the
// router is whole on every rank, so all ranks route alike. The down biases are added on rank 0
// only (the ranks' outputs are partial sums, reduced after the FFN).
struct ExpertSplit {
  int rank = 0, size = 1;
};

class MoeFfn {
 public:
  // Reads layer `layer`'s router (blk.L.ffn_gate_inp, with its .bias when present), experts (3-D
  // blk.L.ffn_{gate,up,down}_exps with their 2-D .bias when present, or Mixtral's older per-expert
  // blk.L.ffn_{gate,up,down}.E) and, when the config has one, the shared expert
  // (ffn_{gate,up,down}_shexp + its sigmoid gate ffn_gate_inp_shexp); keeps `split`'s share.
  static StatusOr<std::unique_ptr<MoeFfn>> Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                                int32_t layer, bool repack, ThreadPool* pack_pool,
                                                const ExpertSplit& split = {});

  // out: [n, dim] = MoE(xn: [n, dim]). capacity_factor as SparsityOptions::moe_capacity_factor.
  // Adds per-expert load and drops to `stats` when non-null. Without dropping, each token's
  // output depends only on that token (batch-invariant, bit-exact).
  void Forward(const float* xn, int64_t n, float* out, double capacity_factor, SparsityStats* stats,
               Scratch& scratch, ThreadPool* pool) const;

  // Bytes read per decoded token: router, k experts (average expert size) and the shared expert.
  size_t ActiveBytesPerToken() const;
  // Bytes of all weights of this layer's FFN.
  size_t TotalBytes() const;
  int32_t n_expert() const { return n_expert_; }

 private:
  struct Expert {
    ExpertMatrix gate, up, down;  // [ffn, dim], [ffn, dim], [dim, ffn]
    // gpt-oss's biases, added after each projection: [ffn], [ffn], [dim]; null: none.
    const float *gate_bias = nullptr, *up_bias = nullptr, *down_bias = nullptr;
  };
  // Keeps `split`'s rows of gate/up and columns of down of every expert and the shared one
  // (down columns copied into slices_); the names are for errors.
  Status Split(const formats::WeightSource& src, int32_t layer, const ExpertSplit& split);
  // out: [m, dim] = down(act(gate x) * up x) for x: [m, dim]; act SiLU, or gpt-oss's clamped
  // SwiGLU (swiglu_oai_).
  void RunExpert(const Expert& e, const float* x, int64_t m, float* out, Scratch& scratch,
                 ThreadPool* pool) const;

  int32_t n_expert_ = 0, k_ = 0, dim_ = 0, ffn_ = 0, shared_ffn_ = 0;
  bool normalize_ = true;
  float weight_scale_ = 0.0f;  // the top-k weights times this (deepseek2); 0 or 1: as routed
  bool softmax_after_topk_ = false, swiglu_oai_ = false;  // gpt-oss (ModelConfig)
  ExpertMatrix router_;             // [n_expert, dim]
  std::vector<float> router_bias_;  // [n_expert] added to the logits (gpt-oss), or empty
  // gpt-oss's expert biases, f32: [n_expert, ffn] x2 (gate, up), [n_expert, dim] (down), or empty.
  std::vector<float> gate_bias_, up_bias_, down_bias_;
  std::vector<Expert> experts_;     // [n_expert]
  Expert shared_;                   // [shared_ffn, dim] ... (absent when shared_ffn_ == 0)
  std::vector<float> shared_gate_;  // [dim] sigmoid gate of the shared expert (may be empty)
  // Split: the down projections' column slices ([n_expert, dim, ffn / size] each buffer).
  std::vector<std::shared_ptr<AlignedBuffer>> slices_;
};

}  // namespace ferry
