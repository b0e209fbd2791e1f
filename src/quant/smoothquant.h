// SmoothQuant (Xiao et al. 2023) and naive W8A8. Smoothing migrates activation outliers into
// the weights: for linears after an RMSNorm (q/k/v; gate/up),
//   s_j = max|X_j|^alpha / max|W_:j|^(1-alpha)   (alpha 0.5: sqrt(max|X_j| / max|W_:j|)),
// W[:, j] *= s_j and the norm weight /= s_j, exact in full precision. Then every linear is
// stored per the W8A8 contract (docs/formats.md): int8 weights with a per-output-channel scale,
// activations quantized per token at run time (or with a static per-tensor scale).
#pragma once

#include <optional>
#include <vector>

#include "base/status.h"
#include "quant/calibration.h"
#include "quant/float_model.h"
#include "quant/quant_writer.h"

namespace ferry::quant {

// s [n_in] for linears sharing input with per-channel max |x| = x_max.
std::vector<float> SmoothingScales(const std::vector<const FloatLinear*>& lins,
                                   const std::vector<float>& x_max, double alpha);

// Smooths every attn_in and ffn_in group of m (folded into the RMSNorm weights) and updates
// stats' max_abs / mean_abs / rows of those inputs to the smoothed activations.
Status ApplySmoothQuant(FloatModel& m, CalibStats& stats, double alpha);

struct W8A8Options {
  bool static_act = false;  // per-tensor activation scale from calibration max |x| (needs stats)
};
// Int8 payloads for every linear (per-channel weights; input_scale when static).
StatusOr<PayloadMap> QuantizeW8A8(const FloatModel& m, const CalibStats* stats, const W8A8Options& options);

// For previews without the INT8 runtime: m's linears replaced by their dequantized int8
// weights, and the activation hook that applies the same per-token (or static) rounding.
FloatModel FakeQuantW8A8Model(const FloatModel& m, const PayloadMap& payloads);
ActQuantHook W8A8ActHook(const PayloadMap& payloads);

}  // namespace ferry::quant
