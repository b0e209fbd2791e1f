// Helpers for the quantization tests: a small synthetic model as a FloatModel, random
// calibration tokens, and a relative logits difference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "quant/calibration.h"
#include "quant/float_model.h"
#include "synthetic/synthetic_model.h"
#include "test_util.h"

namespace ferry::quant::testing {

// The `tiny` preset (dim 64, 2 layers, 4 heads / 2 kv heads, ffn 192) or `tiny-qwen2` in f32.
inline std::string WriteTinyModel(const std::string& dir, const std::string& preset = "tiny") {
  SyntheticModelOptions o;
  o.preset = preset;
  o.type = DType::kF32;
  o.stddev = 0.08f;
  o.threads = 1;
  const std::string path = dir + "/" + preset + ".gguf";
  EXPECT_TRUE(WriteSyntheticModel(path, o).ok());
  return path;
}

inline std::vector<int32_t> RandomTokens(int32_t n_vocab, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, n_vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = d(rng);
  return t;
}

// max |a - b| / max |a|
inline double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(a[i])));
  }
  return num / den;
}

inline CalibStats TinyCalibration(const FloatModel& m, uint32_t seed = 5) {
  CalibOptions o;
  o.n_windows = 4;
  o.ctx = 64;
  o.max_rows = 128;
  o.source = "random tokens";
  auto s = Calibrate(m, RandomTokens(m.config.n_vocab, 4 * 64, seed), o, nullptr);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

}  // namespace ferry::quant::testing
