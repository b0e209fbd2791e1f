// ActivationTaps: the hooks through which the offline tools (quant/: calibration, AWQ,
// SmoothQuant emulation) see and replace the inputs of a model's linear layers, so that they run
// the real forward pass (model/llama.cc) on f32 weights instead of a copy of it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

namespace ferry {

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

// Called with the input rows of every linear input of every layer: x is [n_tok, n_in].
using InputHook =
    std::function<void(int32_t layer, InputKind input, const float* x, int64_t n_tok, int64_t n_in)>;
// Optionally replaces a linear's input before it is used (fake activation quantization):
// x is [n_tok, n_in], modified in place; called once per linear (q, k, v each see a copy).
using ActQuantHook =
    std::function<void(int32_t layer, LinearKind kind, float* x, int64_t n_tok, int64_t n_in)>;

struct ActivationTaps {
  InputHook on_input;      // may be empty
  ActQuantHook act_quant;  // may be empty
};

}  // namespace ferry
