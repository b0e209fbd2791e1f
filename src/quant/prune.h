// Unstructured and 2:4 pruning of every block's linear layers (embeddings and the output head
// are kept). Scores are compared within each output row (Wanda's comparison group):
//   magnitude: |W_ij|        wanda: |W_ij| * ||X_j||_2  (||X_j||_2 from calibration)
// The lowest-scoring weights of each row (or 2 of every 4 consecutive inputs) become 0; ties
// break by input index, so the result is deterministic.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "quant/calibration.h"
#include "quant/float_model.h"

namespace ferry::quant {

enum class PruneMethod { kMagnitude, kWanda };

struct PruneOptions {
  PruneMethod method = PruneMethod::kMagnitude;
  double sparsity = 0.5;  // unstructured: fraction zeroed per row (ignored with n:m)
  int n = 0, m = 0;       // n:m semi-structured (2:4): n nonzeros kept in every m consecutive inputs
};

struct PruneLayerReport {
  int32_t layer;
  LinearKind kind;
  int64_t zeros, total;
};

// Prunes one weight matrix [n_out, n_in] given per-input norms x_norm [n_in] (empty for
// magnitude). Returns the number of zeros.
int64_t PruneMatrix(FloatLinear& lin, const std::vector<float>& x_norm, const PruneOptions& options);

// Prunes every linear of every block; stats needed for wanda.
StatusOr<std::vector<PruneLayerReport>> PruneModel(FloatModel& m, const CalibStats* stats,
                                                   const PruneOptions& options);

}  // namespace ferry::quant
