// Calibration: runs the full-precision FloatModel over calibration windows and records, for
// the input of every linear layer, per-channel statistics and a bounded, evenly strided sample
// of input rows (what AWQ's search and Wanda's scores need). Saved as a GGUF of f32 tensors.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "quant/float_model.h"

namespace ferry::quant {

struct InputStats {
  int64_t n_in = 0;
  std::vector<float> max_abs;   // [n_in] max_t |x_tj|
  std::vector<float> mean_abs;  // [n_in] mean_t |x_tj|
  std::vector<float> l2;        // [n_in] sqrt(sum_t x_tj^2)  (Wanda's ||X_j||_2)
  std::vector<float> rows;      // [n_rows, n_in] sampled input rows
  int64_t n_rows() const { return n_in ? static_cast<int64_t>(rows.size()) / n_in : 0; }
};

struct CalibStats {
  std::string source;                             // calibration text file
  int32_t n_windows = 0;                          // windows run
  int32_t ctx = 0;                                // tokens per window
  int64_t n_tokens = 0;                           // rows seen per input
  std::vector<std::array<InputStats, 4>> layers;  // [n_layers][InputKind]
  // Head pruning (model/attention_sparsity.h): per layer, each head's mean over tokens of
  // ||W_o[:, head] . o_head||_2, its output's contribution to the residual stream.
  // [n_layers][n_heads]; empty in files written before it existed.
  std::vector<std::vector<float>> head_importance;
  const InputStats& At(int32_t layer, InputKind k) const {
    return layers[static_cast<size_t>(layer)][static_cast<size_t>(k)];
  }
  // "FILE (N windows of L tokens)"
  std::string Describe() const;
};

struct CalibOptions {
  int32_t n_windows = 64;  // windows of ctx tokens (fewer if the text is short)
  int32_t ctx = 256;
  int64_t max_rows = 2048;  // sampled rows kept per input
  int32_t bos = -1;         // replaces each window's first token when >= 0
  std::string source;       // recorded in the stats
  std::function<void(int32_t done, int32_t total)> progress;
};

// tokens: the calibration text tokenized once with BOS.
StatusOr<CalibStats> Calibrate(const FloatModel& m, const std::vector<int32_t>& tokens,
                               const CalibOptions& options, ThreadPool* pool);

Status SaveCalibStats(const std::string& path, const CalibStats& stats);
StatusOr<CalibStats> LoadCalibStats(const std::string& path);

}  // namespace ferry::quant
