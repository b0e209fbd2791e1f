#include "model/kv_group_layout.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"

namespace ferry {

KvGroupLayout KvGroupLayout::Single(int32_t n_layers) {
  KvGroupLayout g;
  g.layers_per_group = n_layers;
  g.windows = {0};
  g.layer_group.assign(static_cast<size_t>(n_layers), 0);
  g.layer_index.resize(static_cast<size_t>(n_layers));
  std::iota(g.layer_index.begin(), g.layer_index.end(), 0);
  return g;
}

KvGroupLayout KvGroupLayout::ForModel(const ModelConfig& c, int32_t max_seq_len) {
  if (c.sliding_window <= 0 || c.sliding_window >= max_seq_len) return Single(c.n_layers);
  std::vector<int32_t> full, sliding;  // layer ids of each kind, in order
  for (int32_t l = 0; l < c.n_layers; ++l) (c.IsSlidingLayer(l) ? sliding : full).push_back(l);
  if (sliding.empty()) return Single(c.n_layers);
  KvGroupLayout g;
  g.layers_per_group = std::gcd(static_cast<int32_t>(full.size()), static_cast<int32_t>(sliding.size()));
  g.layer_group.resize(static_cast<size_t>(c.n_layers));
  g.layer_index.resize(static_cast<size_t>(c.n_layers));
  auto fill = [&](const std::vector<int32_t>& layers, int32_t window) {
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % static_cast<size_t>(g.layers_per_group) == 0) g.windows.push_back(window);
      g.layer_group[static_cast<size_t>(layers[i])] = g.num_groups() - 1;
      g.layer_index[static_cast<size_t>(layers[i])] = static_cast<int32_t>(i % g.layers_per_group);
    }
  };
  fill(full, 0);
  fill(sliding, c.sliding_window);
  FERRY_CHECK(g.num_groups() * g.layers_per_group == c.n_layers);
  return g;
}

KvGroupLayout KvGroupLayout::ForStage(int32_t first, int32_t last) const {
  KvGroupLayout g = *this;
  std::vector<int32_t> held(windows.size(), 0);  // [groups] stage layers so far
  for (int32_t l = 0; l < num_layers(); ++l) {
    const size_t i = static_cast<size_t>(l);
    g.layer_index[i] = l >= first && l < last ? held[static_cast<size_t>(layer_group[i])]++ : -1;
  }
  g.layers_per_group = std::max(1, *std::max_element(held.begin(), held.end()));
  return g;
}

}  // namespace ferry
