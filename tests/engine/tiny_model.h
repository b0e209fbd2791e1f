// The engine tests' model: the `tiny` preset in q8_0 with weights large enough that greedy
// choices are far from ties, written to `path` and loaded with its synthetic tokenizer.
#pragma once

#include <string>

#include "engine/loaded_model.h"
#include "synthetic/synthetic_model.h"

namespace ferry::testing {

inline StatusOr<LoadedModel> MakeTinyModel(const std::string& path, const std::string& preset = "tiny") {
  SyntheticModelOptions o;
  o.preset = preset;
  o.type = DType::kQ8_0;
  o.stddev = 0.08f;
  FERRY_RETURN_IF_ERROR(WriteSyntheticModel(path, o));
  return LoadModel(path);
}

}  // namespace ferry::testing
