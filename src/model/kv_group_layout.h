// KvGroupLayout: how the layers of a paged KV cache share block tables (vLLM's hybrid KV cache
// manager). The layers form KV groups of the same number of layers each, every group all
// full-attention or all sliding-window; a group has its own block table per sequence, and one
// physical block holds block_size tokens of one group's layers. A sliding group's sequence then
// gives back the blocks that have left its window while the full groups keep theirs, and all
// groups still draw their blocks from one pool of equal-sized blocks (docs/architecture.md).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace ferry {

struct KvGroupLayout {
  int32_t layers_per_group = 0;      // layers a physical block holds
  std::vector<int32_t> windows;      // [groups] 0: full attention, else the sliding window (positions)
  std::vector<int32_t> layer_group;  // [n_layers] the group of each layer
  std::vector<int32_t> layer_index;  // [n_layers] its place among its group's layers (-1: not held)

  int32_t num_groups() const { return static_cast<int32_t>(windows.size()); }
  int32_t num_layers() const { return static_cast<int32_t>(layer_group.size()); }

  // Every layer in one full-attention group: one block table, blocks of every layer (the
  // layout of a model without sliding layers, and of one whose blocks are all kept).
  static KvGroupLayout Single(int32_t n_layers);
  // The groups of `c`'s layers for sequences of up to max_seq_len positions: Single unless it
  // has sliding layers whose window is shorter than max_seq_len. Then layers_per_group is the
  // gcd of the full and sliding layer counts (so no group is padded), full groups come first,
  // and each kind's layers fill its groups in layer order.
  static KvGroupLayout ForModel(const ModelConfig& c, int32_t max_seq_len);
  // These groups on a pipeline stage that computes only layers [first, last): the others are
  // not held (layer_index -1) and a block holds the most stage layers of any one group (all
  // of the stage's layers with one group), so that a stage's blocks are its share of the bytes.
  KvGroupLayout ForStage(int32_t first, int32_t last) const;
};

}  // namespace ferry
