#include "model/rope_angles.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"

namespace ferry {

RopeAngles::RopeAngles(int32_t rot_dim, float base, float freq_scale, std::vector<float> factors,
                       YarnRamp yarn, float magnitude)
    : pairs_(rot_dim / 2),
      theta_scale_(std::pow(base, -2.0f / static_cast<float>(rot_dim))),
      freq_scale_(freq_scale),
      factors_(std::move(factors)),
      yarn_(yarn),
      magnitude_(magnitude) {
  FERRY_CHECK(rot_dim >= 0 && rot_dim % 2 == 0);
  FERRY_CHECK(factors_.empty() || factors_.size() == static_cast<size_t>(pairs_));
}

void RopeAngles::Fill(int32_t pos, float* cs) const {
  float theta = static_cast<float>(pos);
  for (int32_t j = 0; j < pairs_; ++j) {
    const float extrap = factors_.empty() ? theta : theta / factors_[static_cast<size_t>(j)];
    float angle = freq_scale_ * extrap;
    if (yarn_.enabled) {
      const float y = (static_cast<float>(j) - yarn_.lo) / std::max(0.001f, yarn_.hi - yarn_.lo);
      const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
      angle = angle * (1.0f - ramp) + extrap * ramp;
    }
    cs[2 * j] = std::cos(angle) * magnitude_;
    cs[2 * j + 1] = std::sin(angle) * magnitude_;
    theta *= theta_scale_;
  }
}

}  // namespace ferry
