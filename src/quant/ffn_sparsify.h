// `ferry sparsify`'s training (docs/sparsity.md "Contextual FFN sparsity"): from the FFN inputs
// that calibration sampled (CalibStats' ffn_in rows), per layer
//  - the |SiLU(gate)| quantiles that skip 0%, 1%, ..., 100% of the neurons (threshold mode);
//  - a rank-r predictor of the gate, g^ = B A (x - mean) + mu, fitted by reduced-rank ridge
//    regression on the calibration inputs (closed form, deterministic, no learning rate). At
//    run time the neurons with the largest |SiLU(g^)| are kept (DejaVu's question "which
//    neurons will be active", asked before gate/up are computed). Regressing the 0/1
//    "above threshold" labels directly does not work for SiLU: |SiLU(g)| is large for both
//    signs of g, which no linear score separates.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "model/ffn_sparsity_file.h"
#include "quant/calibration.h"
#include "quant/float_model.h"

namespace ferry::quant {

struct FfnSparsifyOptions {
  double train_sparsity = 0.5;  // recorded as the predictor's default sparsity at run time
  int32_t rank = 0;             // predictor rank; 0: min(64, dim / 2), at least 1
  double ridge = 1e-3;          // ridge strength relative to the mean input variance
  int32_t subspace_iters = 12;  // power iterations for the rank-r subspace
  std::function<void(int32_t done, int32_t total)> progress;  // per layer
};

// Gate pre-activations of rows x: [n, dim] through layer `layer`'s gate: out [n, ffn].
std::vector<float> GatePreActivations(const FloatModel& m, int32_t layer, const float* x, int64_t n,
                                      ThreadPool* pool);
// |SiLU(gate)| of rows x: [n, dim] through layer `layer`'s gate: out [n, ffn].
std::vector<float> AbsSiluGate(const FloatModel& m, int32_t layer, const float* x, int64_t n,
                               ThreadPool* pool);

// Thresholds and predictors for every layer from stats' sampled ffn_in rows.
StatusOr<FfnSparsityFile> TrainFfnSparsity(const FloatModel& m, const CalibStats& stats,
                                           const FfnSparsifyOptions& options, ThreadPool* pool);

// The predictor's scores |SiLU(g^)| for rows x: [n, dim] of layer L: out [n, ffn].
std::vector<float> PredictorScores(const FfnSparsityFile& f, int32_t layer, const float* x, int64_t n);

// How many of the neurons above layer L's threshold for `sparsity` (in act: [n, ffn], from
// AbsSiluGate) are among the top (1 - sparsity) * ffn predictor scores of the same rows x:
// [n, dim], summed over rows. Chance level is 1 - sparsity.
double PredictorRecall(const FfnSparsityFile& f, int32_t layer, const float* x, const std::vector<float>& act,
                       int64_t n, double sparsity);

}  // namespace ferry::quant
