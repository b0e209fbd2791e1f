// LoadedModel: a model file opened end to end (weights, model, tokenizer) from any format,
// with the tokenizer side files (tokenizer.json, tokenizer.model, llama2.c tok*.bin) found
// and merged into the metadata.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "formats/weight_source.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

struct LoadOptions {
  std::string tokenizer_path;     // explicit tokenizer file; empty = find beside the model
  bool repack_weights = true;     // see ModelOptions
  SparsityOptions sparsity = {};  // run-time sparsity (model/sparsity_options.h); default exact
  ParallelLayout parallel = {};   // split over MPI ranks (model/parallel.h); default: none
  bool exact_gelu = false;        // see ModelOptions
};

struct LoadedModel {
  std::unique_ptr<formats::WeightSource> source;  // owns the mapped weights
  std::unique_ptr<Model> model;                   // reads weights from `source`
  std::optional<Tokenizer> tokenizer;

  const ModelConfig& config() const { return model->config(); }
};

StatusOr<LoadedModel> LoadModel(const std::string& path, const LoadOptions& options = {});

// Only the weights + tokenizer metadata (no model build): for `ferry info`/`tokenize` on
// vocab-only files.
StatusOr<std::unique_ptr<formats::WeightSource>> OpenWithTokenizer(const std::string& path,
                                                                   const LoadOptions& options = {});

}  // namespace ferry
