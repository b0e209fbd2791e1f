// Contextual FFN sparsity at run time (docs/sparsity.md "Contextual FFN sparsity"): per token,
// only some neurons of a dense SwiGLU FFN are computed.
//  - threshold (CATS/TEAL): the gate is computed in full; neurons with |SiLU(gate)| below the
//    layer's calibrated threshold are skipped, so up and down read only the kept rows;
//  - predictor (DejaVu): a low-rank predictor scores the neurons from the FFN input and the
//    top (1 - S) fraction is kept, so gate, up and down all read only the kept rows.
// Steps small enough that row-sparse reads pay (n_tok * kept fraction < 1: decode) run the
// row-sparse kernels (kernels::MatVecRows, and kernels::AxpyRows over a transposed down copy
// [ffn, dim]); larger steps (prefill) run the dense kernels with the same mask applied, so the
// model computes the same function whatever the step size (up to summation order in down).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "core/thread_pool.h"
#include "model/ffn_sparsity_file.h"
#include "model/linear.h"
#include "model/model_config.h"
#include "model/scratch.h"
#include "model/sparsity_options.h"

namespace ferry {

// One layer's dense FFN as the model holds it (gate_up: stacked gate|up rows, n_out 0 if not).
struct FfnLinears {
  const Linear* gate;     // [ffn, dim]
  const Linear* up;       // [ffn, dim]
  const Linear* down;     // [dim, ffn]
  const Linear* gate_up;  // [2 * ffn, dim] or n_out 0
};

enum class FfnSparsityMode { kThreshold, kPredictor };

class SparseFfn {
 public:
  // Loads the sidecar named by `options` (ffn_predictor, else ffn_stats; an error telling the
  // user to run `ferry sparsify` when neither is given), checks it against the model and
  // builds each layer's transposed down copy and predictor.
  static StatusOr<std::unique_ptr<SparseFfn>> Create(const SparsityOptions& options,
                                                     const ModelConfig& config,
                                                     const std::vector<FfnLinears>& layers, ThreadPool* pool);

  // out: [n, dim] = FFN(xn: [n, dim]) with each token's neurons chosen by the mode. The
  // sparsity comes from `options` at each call (so it can change between calls); with
  // options.UsesFfnSparsity() false the caller runs the dense FFN instead.
  void Forward(int32_t layer, const FfnLinears& w, const SparsityOptions& options, const float* xn, int64_t n,
               float* out, SparsityStats* stats, Scratch& scratch, ThreadPool* pool) const;

  FfnSparsityMode mode() const { return mode_; }
  // The fraction skipped per token: options' ffn_sparsity, or the predictor's trained one.
  double TargetSparsity(const SparsityOptions& options) const;
  // Memory the sparse path adds: transposed down copies and predictors.
  size_t ExtraBytes() const;

 private:
  struct Layer {
    AlignedBuffer down_t;  // [ffn, RowBytes(down_t_type, dim)] transposed down projection
    DType down_t_type = DType::kF32;
    AlignedBuffer pred_a, pred_b;  // f16 [rank, dim], [ffn, rank]
    std::vector<float> pred_bias;  // [ffn]
  };
  // The kept neurons of token xn ([dim]) for the predictor, ascending: keep[k].
  void PredictKeep(const Layer& L, const float* xn, int64_t n_keep, int32_t* keep, int64_t* n_kept,
                   Scratch& scratch) const;

  FfnSparsityMode mode_ = FfnSparsityMode::kThreshold;
  FfnSparsityFile file_;  // thresholds; predictor factors moved into layers_
  int64_t dim_ = 0, ffn_ = 0, rank_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace ferry
