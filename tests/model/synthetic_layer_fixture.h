// Model-layer test helpers: a synthetic model written to disk and opened as a weight source
// with its config (for tests that drive one layer or component directly), and random rows.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "model/model_config.h"
#include "synthetic/synthetic_model.h"

namespace ferry::testing {

// Writes `preset` in `type` to dir/PRESET-TYPE.gguf (weights large enough that choices are far
// from ties) and returns the path.
inline std::string WriteSyntheticTestModel(const std::string& dir, const std::string& preset, DType type) {
  const std::string path = dir + "/" + preset + "-" + DTypeName(type) + ".gguf";
  SyntheticModelOptions o;
  o.preset = preset;
  o.type = type;
  o.stddev = 0.08f;
  EXPECT_TRUE(WriteSyntheticModel(path, o).ok());
  return path;
}

struct OpenedModel {
  std::unique_ptr<formats::WeightSource> src;
  ModelConfig cfg;
};
inline OpenedModel OpenTestModel(const std::string& path) {
  OpenedModel m;
  auto src = formats::OpenWeightSource(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  if (!src.ok()) return m;
  m.src = std::move(*src);
  auto cfg = ModelConfig::FromMetadata(m.src->metadata());
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (cfg.ok()) m.cfg = *cfg;
  return m;
}

// [n, dim] deterministic values in [-2, 2] (an LCG: the same on every platform).
inline std::vector<float> RandomRows(int64_t n, int64_t dim, uint32_t seed) {
  std::vector<float> x(static_cast<size_t>(n * dim));
  uint32_t s = seed;
  for (float& v : x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 500.0f;
  }
  return x;
}

}  // namespace ferry::testing
