// FloatModel: a LLaMA-family decoder held entirely in mutable f32 (every tensor dequantized),
// with a forward pass that exposes each linear layer's input. The offline tools (calibration,
// AWQ, SmoothQuant, pruning) transform these weights and then write them through formats/.
// It computes what model/llama.cc computes, with f32 weights and no batching tricks.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "formats/weight_source.h"
#include "model/model_config.h"

namespace ferry::quant {

// The linear layers of one block, in forward order. Layers sharing an input form a group:
// {q, k, v} read the attention norm's output, {gate, up} the FFN norm's output.
enum class LinearKind { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr std::array<LinearKind, 7> kAllLinears = {
    LinearKind::kQ,    LinearKind::kK,  LinearKind::kV,   LinearKind::kO,
    LinearKind::kGate, LinearKind::kUp, LinearKind::kDown};
// "attn_q", "ffn_down", ... (the llama.cpp tensor name stem).
const char* LinearStem(LinearKind k);

// The four distinct linear inputs of a block (what calibration records).
enum class InputKind { kAttnIn, kAttnOut, kFfnIn, kFfnMid };
inline constexpr std::array<InputKind, 4> kAllInputs = {InputKind::kAttnIn, InputKind::kAttnOut,
                                                        InputKind::kFfnIn, InputKind::kFfnMid};
InputKind InputOf(LinearKind k);
const char* InputName(InputKind k);  // "attn_in", "attn_out", "ffn_in", "ffn_mid"

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

// Called with the input rows of every linear input of every layer: x is [n_tok, n_in].
using InputHook =
    std::function<void(int32_t layer, InputKind input, const float* x, int64_t n_tok, int64_t n_in)>;
// Optionally replaces a linear's input before it is used (fake activation quantization):
// x is [n_tok, n_in], modified in place; called once per linear (q, k, v each see a copy).
using ActQuantHook =
    std::function<void(int32_t layer, LinearKind kind, float* x, int64_t n_tok, int64_t n_in)>;

struct FloatModel {
  ModelConfig config;
  std::vector<float> token_embd;  // [n_vocab, dim]
  std::vector<float> output;      // [n_vocab, dim] (a copy of token_embd when tied)
  bool tied_output = false;
  std::vector<float> output_norm;  // [dim]
  std::vector<FloatLayer> layers;
  std::vector<float> inv_freq;    // [rot_dim/2] RoPE angle per position (as model/llama.cc)
  formats::TensorRef rope_freqs;  // rope_freqs.weight when the source has it (kept as is)

  // Dequantizes every tensor of `src` (any type Ferry can read) to f32.
  static StatusOr<FloatModel> Load(const formats::WeightSource& src);

  // One sequence from position 0: logits [n_tok, n_vocab]. Hooks and pool may be null; the
  // result does not depend on the pool (kernels::MatMul is thread-count invariant).
  std::vector<float> Forward(const std::vector<int32_t>& tokens, const InputHook& on_input = nullptr,
                             const ActQuantHook& act_quant = nullptr, ThreadPool* pool = nullptr) const;
};

// Perplexity computed as engine/perplexity.cc (llama-perplexity): windows of n_ctx tokens,
// first token BOS, second half scored. For previews of transforms the runtime cannot run yet.
struct FloatPplResult {
  double ppl = 0;
  int64_t n_scored = 0;
};
StatusOr<FloatPplResult> FloatPerplexity(const FloatModel& m, const std::vector<int32_t>& tokens,
                                         int32_t n_ctx, int32_t bos, const ActQuantHook& act_quant = nullptr,
                                         ThreadPool* pool = nullptr);

}  // namespace ferry::quant
