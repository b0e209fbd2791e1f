// AWQ (activation-aware weight quantization, Lin et al. 2023, as AutoAWQ implements it) for
// INT4 weight-only groups. For each set of linears sharing an input X (q/k/v; o; gate/up;
// down), search alpha on a grid for per-input-channel scales s = s_X^alpha (s_X = mean |x|,
// normalised by sqrt(max(s) * min(s))) minimising || Q(W diag(s)) diag(s)^-1 X - W X ||^2 on
// calibration rows; fold diag(s)^-1 into the op before (the RMSNorm weight, or the rows of v
// / up for o / down) so the runtime does no extra scaling; then search a per-(row, group) clip
// ratio of the range minimising that group's output error. q and k are not clipped (AutoAWQ).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "quant/calibration.h"
#include "quant/float_model.h"

namespace ferry::quant {

struct AwqOptions {
  int64_t group = 128;
  int n_grid = 20;  // alpha = i / n_grid, i = 0..n_grid-1 (AutoAWQ's grid)
  bool clip = true;
  int clip_grid = 20;       // clip ratio 1 - i / clip_grid ...
  float max_shrink = 0.5f;  // ... for i < max_shrink * clip_grid (1.0 down to 0.55)
  int64_t clip_rows = 512;  // calibration rows used by the clip search
  // Compare gate/up candidates on the FFN's output (AutoAWQ inspects the MLP module) instead
  // of on the gate/up outputs themselves.
  bool mlp_objective = false;
  // AutoAWQ's duo scaling: s = s_X^alpha / w_mean^(1-alpha), w_mean = mean over rows of
  // |w| / max|w| of its group. Off: s = s_X^alpha as in the AWQ paper.
  bool duo = false;
  std::function<void(int32_t done, int32_t total)> progress;
};

// Result of the scale search for one input group.
struct ScaleSearch {
  std::vector<float> s;  // [n_in] chosen scales (all 1 when alpha = 0 wins)
  double alpha = 0;
  double err = 0;      // output MSE with the chosen scales
  double err_rtn = 0;  // output MSE of plain RTN (alpha = 0)
};

// Maps the group's linear outputs (outs[i]: [n_rows, lins[i]->n_out]) to the output the
// search compares (AutoAWQ's "module to inspect"); null: the linear outputs themselves.
using ModuleOutputFn =
    std::function<std::vector<float>(const std::vector<std::vector<float>>& outs, int64_t n_rows)>;
// The FFN as the module for gate/up: down(silu(gate) * up) with down in full precision.
ModuleOutputFn MlpModuleOutput(const FloatLinear& down);

// Searches the scales for linears sharing input rows X [n_rows, n_in]. s_x [n_in] = mean |x|.
// `tie` (may be empty) maps each input channel to a class whose channels must share one scale
// (GQA: o's channels reading the same v row); s_x is averaged within each class first.
ScaleSearch SearchAwqScale(const std::vector<const FloatLinear*>& lins, const float* x, int64_t n_rows,
                           const std::vector<float>& s_x, int64_t group, int n_grid,
                           const std::vector<int64_t>& tie = {}, const ModuleOutputFn& module = nullptr,
                           bool duo = false);

// Per-(row, group) clip ratios [n_out, ceil(n_in/G)] for W given input rows X [n_rows, n_in].
std::vector<float> SearchAwqClip(const FloatLinear& lin, const float* x, int64_t n_rows, int64_t group,
                                 int clip_grid, float max_shrink);

// Output MSE of (fake-quantized W with clip) against W on X (for reports and tests).
double Int4OutputMse(const FloatLinear& lin, const float* x, int64_t n_rows, int64_t group,
                     const std::vector<float>& clip);

// Folds: W[:, j] *= s[j] (the consumer), and the producer divided by s.
void ScaleColumns(FloatLinear& lin, const std::vector<float>& s);
void DivideRows(FloatLinear& lin, const std::vector<float>& s_rows);  // lin.w[r, :] /= s_rows[r]
void DivideVector(std::vector<float>& v, const std::vector<float>& s);

struct AwqLinearReport {
  int32_t layer;
  LinearKind kind;
  double alpha, err, err_rtn;
};
struct AwqResult {
  std::map<std::pair<int32_t, LinearKind>, std::vector<float>> clip;  // [n_out, ng] per linear
  std::vector<AwqLinearReport> report;  // one per input group (the first linear of it)
};

// Applies AWQ scaling (folded, exact in f32) to every layer of m and searches the clips.
// The caller then quantizes m's linears with QuantizeMatrixInt4(..., result.clip[...]).
StatusOr<AwqResult> ApplyAwq(FloatModel& m, const CalibStats& stats, const AwqOptions& options);

// The scale-only fold with given per-input scales (tests: outputs unchanged before rounding).
// scales[l][InputKind] : [n_in]; o's scales must be constant over channels sharing a v row.
void FoldAwqScales(FloatModel& m, int32_t layer, InputKind input, const std::vector<float>& s);

// o's input channel -> v row (GQA: query head h reads kv head h / (n_heads / n_kv_heads)).
std::vector<int64_t> AttnOutTie(const ModelConfig& c);

}  // namespace ferry::quant
