// RopeAngles: the cos and sin of each rotated pair's angle at a position, computed as llama.cpp's
// CPU backend computes them (ggml_rope_cache_init and rope_yarn): theta starts at the position
// and is multiplied by base^(-2/rot_dim) once per pair, in float, then divided by the pair's
// frequency factor and scaled. The direct form pos * base^(-2j/rot_dim) is no less accurate but
// rounds differently in the last bit, and llama.cpp's q8 activation rounding amplifies such bits
// into a measurable distance (docs/quantization.md, "Where the distance to llama.cpp comes from").
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

class RopeAngles {
 public:
  // YaRN's ramp between interpolated and extrapolated angles: pair j mixes in the extrapolated
  // angle with weight 1 - clamp((j - lo) / max(0.001, hi - lo), 0, 1) (ggml's rope_yarn_ramp,
  // ext_factor 1); lo = hi = 0 with enabled = false leaves the interpolated angle alone.
  struct YarnRamp {
    bool enabled = false;
    float lo = 0.0f, hi = 0.0f;
  };

  RopeAngles() = default;
  // rot_dim: rotated dims per head (even); base: rope theta; freq_scale: 1 / linear scaling;
  // factors: [rot_dim/2] per-pair divisors (llama3's rope_freqs, LongRoPE's short or long
  // factors), empty for none; magnitude: multiplies cos and sin (LongRoPE's and YaRN's
  // attention factor; 1 for none).
  RopeAngles(int32_t rot_dim, float base, float freq_scale, std::vector<float> factors, YarnRamp yarn,
             float magnitude);

  // cs: [rot_dim/2, 2] the cos and sin of each pair's angle at position pos.
  void Fill(int32_t pos, float* cs) const;

 private:
  int32_t pairs_ = 0;
  float theta_scale_ = 1.0f;  // base^(-2/rot_dim), by powf as ggml does
  float freq_scale_ = 1.0f;
  std::vector<float> factors_;  // [pairs_] divisors, or empty
  YarnRamp yarn_;
  float magnitude_ = 1.0f;
};

}  // namespace ferry
