// Shared by `ferry calibrate`, `ferry quantize` and `ferry prune`: open a model (with its
// tokenizer) as a FloatModel, and get calibration statistics from a text or a stats file.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"
#include "quant/calibration.h"
#include "quant/float_model.h"
#include "tokenizer/tokenizer.h"

namespace ferry::cli {

struct QuantInputs {
  std::unique_ptr<formats::WeightSource> source;  // owns the mapped weights and metadata
  quant::FloatModel model;
  std::optional<Tokenizer> tokenizer;
};

StatusOr<QuantInputs> LoadForQuant(const std::string& model_path, const std::string& tokenizer_path);

struct CalibFlags {
  std::string calib;     // text file, or a stats file from `ferry calibrate`
  int32_t samples = 64;  // windows
  int32_t ctx = 256;     // tokens per window
  int64_t rows = 2048;   // sampled input rows kept per linear input
};

// Runs calibration on a text (progress on stderr), or loads a stats GGUF.
StatusOr<quant::CalibStats> GetCalibration(const QuantInputs& in, const CalibFlags& flags, ThreadPool& pool);

// File size in bytes, or 0.
uint64_t FileSize(const std::string& path);

}  // namespace ferry::cli
