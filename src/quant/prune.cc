#include "quant/prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ferry::quant {

int64_t PruneMatrix(FloatLinear& lin, const std::vector<float>& x_norm, const PruneOptions& o) {
  std::vector<double> score(static_cast<size_t>(lin.n_in));
  std::vector<int64_t> idx(static_cast<size_t>(lin.n_in));
  for (int64_t r = 0; r < lin.n_out; ++r) {
    float* w = lin.w.data() + r * lin.n_in;
    for (int64_t j = 0; j < lin.n_in; ++j)
      score[static_cast<size_t>(j)] =
          std::fabs(static_cast<double>(w[j])) * (x_norm.empty() ? 1.0 : x_norm[static_cast<size_t>(j)]);
    auto lower = [&](int64_t a, int64_t b) {
      return score[static_cast<size_t>(a)] < score[static_cast<size_t>(b)] ||
             (score[static_cast<size_t>(a)] == score[static_cast<size_t>(b)] && a < b);
    };
    if (o.m > 0) {
      // Every m consecutive inputs keep their n highest (the usual N:M, as NVIDIA's 2:4 and the
      // SparseGPT/Wanda papers state it); a ragged tail of r < m inputs keeps ceil(r * n / m),
      // so no part of the row is sparser than the pattern.
      for (int64_t j0 = 0; j0 < lin.n_in; j0 += o.m) {
        const int64_t len = std::min<int64_t>(o.m, lin.n_in - j0);
        const int64_t drop = len - (len * o.n + o.m - 1) / o.m;
        std::vector<int64_t> g(static_cast<size_t>(len));
        std::iota(g.begin(), g.end(), j0);
        std::sort(g.begin(), g.end(), lower);
        for (int64_t i = 0; i < drop; ++i) w[g[static_cast<size_t>(i)]] = 0.f;
      }
    } else {
      const auto drop = static_cast<int64_t>(std::floor(o.sparsity * static_cast<double>(lin.n_in)));
      std::iota(idx.begin(), idx.end(), 0);
      std::sort(idx.begin(), idx.end(), lower);
      for (int64_t i = 0; i < drop; ++i) w[idx[static_cast<size_t>(i)]] = 0.f;
    }
  }
  return std::count(lin.w.begin(), lin.w.end(), 0.f);
}

StatusOr<std::vector<PruneLayerReport>> PruneModel(FloatModel& m, const CalibStats* stats,
                                                   const PruneOptions& o) {
  if (o.m == 0 && !(o.sparsity >= 0.0 && o.sparsity < 1.0))
    return InvalidArgumentError("--sparsity {} must be in [0, 1)", o.sparsity);
  if (o.m > 0 && !(o.n > 0 && o.n < o.m))
    return InvalidArgumentError("--pattern {}:{} needs 0 < N < M", o.n, o.m);
  if (o.method == PruneMethod::kWanda) {
    if (!stats) return InvalidArgumentError("wanda needs calibration activations (--calib TEXT or STATS)");
    if (stats->layers.size() != m.layers.size())
      return InvalidArgumentError("calibration stats have {} layers, the model {}", stats->layers.size(),
                                  m.layers.size());
  }
  std::vector<PruneLayerReport> report;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    for (LinearKind k : kAllLinears) {
      FloatLinear& lin = m.layers[l][k];
      std::vector<float> norm;
      if (o.method == PruneMethod::kWanda) {
        norm = stats->At(static_cast<int32_t>(l), InputOf(k)).l2;
        if (static_cast<int64_t>(norm.size()) != lin.n_in)
          return InvalidArgumentError("calibration stats for layer {} {} have {} channels, the model {}", l,
                                      LinearStem(k), norm.size(), lin.n_in);
      }
      const int64_t z = PruneMatrix(lin, norm, o);
      report.push_back({static_cast<int32_t>(l), k, z, lin.n_out * lin.n_in});
    }
  }
  return report;
}

}  // namespace ferry::quant
