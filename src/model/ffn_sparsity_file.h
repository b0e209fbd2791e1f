// The `ferry sparsify` sidecar (docs/formats.md "FFN sparsity sidecar"): per layer of a dense
// FFN, the |SiLU(gate)| thresholds that skip 0%, 1%, ..., 100% of the neurons on the
// calibration text, and a DejaVu-style low-rank predictor of the gate, g^ = B (A x) + bias,
// whose |SiLU(g^)| scores the neurons before gate/up are computed. A small GGUF of f32 tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"

namespace ferry {

// Threshold grid: kFfnGridSteps + 1 quantiles, entry i skips i / kFfnGridSteps of the neurons.
inline constexpr int32_t kFfnGridSteps = 100;

struct FfnLayerSparsity {
  std::vector<float> thresholds;  // [kFfnGridSteps + 1] ascending quantiles of |SiLU(gate)|
  std::vector<float> pred_a;      // [rank, dim]  first factor
  std::vector<float> pred_b;      // [ffn, rank]  second factor
  std::vector<float> pred_bias;   // [ffn]        offset (the input mean folded in)

  // |SiLU(gate)| threshold that skips `sparsity` of the neurons (linear between grid points).
  float Threshold(double sparsity) const;
};

struct FfnSparsityFile {
  int32_t n_layers = 0, dim = 0, ffn = 0, rank = 0;
  double train_sparsity = 0;  // the predictor mode's default sparsity (`ferry sparsify --sparsity`)
  std::string calib_source;   // "FILE (N windows of L tokens)"
  int64_t calib_rows = 0;     // sampled FFN inputs per layer used for thresholds and training
  std::vector<FfnLayerSparsity> layers;

  // Clear error naming `path` when the file was made for another model shape.
  Status CheckMatches(const ModelConfig& config, const std::string& path) const;
};

Status SaveFfnSparsity(const std::string& path, const FfnSparsityFile& file);
// Every error names the file and the tensor or key at fault.
StatusOr<FfnSparsityFile> LoadFfnSparsity(const std::string& path);

}  // namespace ferry
