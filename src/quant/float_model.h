// FloatModel: a LLaMA-family decoder's weights held entirely in mutable f32 (every tensor
// dequantized). The offline tools (calibration, AWQ, SmoothQuant, pruning) transform these
// weights and then write them through formats/. Its forward pass is the runtime's
// (model/llama.cc) run on these f32 weights with activation taps: there is one forward pass.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"
#include "model/activation_taps.h"
#include "model/model.h"
#include "model/model_config.h"

namespace ferry::quant {

struct FloatLinear {
  int64_t n_out = 0, n_in = 0;
  std::vector<float> w;  // [n_out, n_in]
};

struct FloatLayer {
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  std::vector<float> bq, bk, bv;           // [q_dim], [kv_dim] x2, or empty
  std::array<FloatLinear, 7> lin;          // indexed by LinearKind
  FloatLinear& operator[](LinearKind k) { return lin[static_cast<size_t>(k)]; }
  const FloatLinear& operator[](LinearKind k) const { return lin[static_cast<size_t>(k)]; }
};

struct FloatModel {
  ModelConfig config;
  Metadata metadata;              // the source's, so the runtime builds the same model
  std::vector<float> token_embd;  // [n_vocab, dim]
  std::vector<float> output;      // [n_vocab, dim] (a copy of token_embd when tied)
  bool tied_output = false;
  std::vector<float> output_norm;  // [dim]
  std::vector<FloatLayer> layers;
  std::vector<float> rope_factors;  // [rot_dim/2] rope_freqs.weight in f32, or empty
  formats::TensorRef rope_freqs;    // rope_freqs.weight when the source has it (kept as is)

  // Dequantizes every tensor of `src` (any type Ferry can read) to f32.
  static StatusOr<FloatModel> Load(const formats::WeightSource& src);

  // These weights as a WeightSource (f32 tensors pointing into this object, which must outlive
  // it and not be resized meanwhile).
  std::unique_ptr<formats::WeightSource> AsWeightSource() const;

  // The runtime model over these weights, read in place (zero-copy): build it again after the
  // weights change. `source` is AsWeightSource()'s and must outlive the model.
  static StatusOr<std::unique_ptr<Model>> Build(const formats::WeightSource& source);

  // One sequence from position 0: logits [n_tok, n_vocab], by the runtime model with these
  // taps. Hooks and pool may be null; the result does not depend on the pool.
  std::vector<float> Forward(const std::vector<int32_t>& tokens, const InputHook& on_input = nullptr,
                             const ActQuantHook& act_quant = nullptr, ThreadPool* pool = nullptr) const;
};

}  // namespace ferry::quant
