// Ferry int4 payloads for every linear of a FloatModel (RTN, or AWQ with its clip ratios).
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "quant/float_model.h"
#include "quant/quant_writer.h"

namespace ferry::quant {

using ClipMap = std::map<std::pair<int32_t, LinearKind>, std::vector<float>>;

// Group 32, 64 or 128; clips (may be null or miss a linear: no clipping) from SearchAwqClip.
PayloadMap Int4Payloads(const FloatModel& m, int64_t group, const ClipMap* clips);

}  // namespace ferry::quant
