#include "model/activation_taps.h"

namespace ferry {

const char* LinearStem(LinearKind k) {
  switch (k) {
    case LinearKind::kQ:
      return "attn_q";
    case LinearKind::kK:
      return "attn_k";
    case LinearKind::kV:
      return "attn_v";
    case LinearKind::kO:
      return "attn_output";
    case LinearKind::kGate:
      return "ffn_gate";
    case LinearKind::kUp:
      return "ffn_up";
    case LinearKind::kDown:
      return "ffn_down";
  }
  return "?";
}

InputKind InputOf(LinearKind k) {
  switch (k) {
    case LinearKind::kQ:
    case LinearKind::kK:
    case LinearKind::kV:
      return InputKind::kAttnIn;
    case LinearKind::kO:
      return InputKind::kAttnOut;
    case LinearKind::kGate:
    case LinearKind::kUp:
      return InputKind::kFfnIn;
    case LinearKind::kDown:
      return InputKind::kFfnMid;
  }
  return InputKind::kAttnIn;
}

const char* InputName(InputKind k) {
  switch (k) {
    case InputKind::kAttnIn:
      return "attn_in";
    case InputKind::kAttnOut:
      return "attn_out";
    case InputKind::kFfnIn:
      return "ffn_in";
    case InputKind::kFfnMid:
      return "ffn_mid";
  }
  return "?";
}

}  // namespace ferry
