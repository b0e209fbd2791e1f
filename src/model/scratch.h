// Scratch: buffers a forward pass reuses from call to call, each grown to the largest call seen
// (so steady-state calls allocate nothing). Owned by whoever calls Model::Forward (an engine, a
// generator, a proposer): the model keeps no per-call state, and one model can serve several
// callers at once. Slots are small integers each user names in an enum of its own.
#pragma once

#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace ferry {

class Scratch {
 public:
  // [n] elements of slot `slot`; contents are whatever the last call left.
  float* Floats(int slot, int64_t n) { return Fit(floats_, slot, n); }
  int32_t* Ints(int slot, int64_t n) { return Fit(ints_, slot, n); }
  uint8_t* Bytes(int slot, int64_t n) { return Fit(bytes_, slot, n); }

 private:
  template <typename T>
  static T* Fit(std::vector<std::vector<T>>& slots, int slot, int64_t n) {
    if (slots.size() <= static_cast<size_t>(slot)) slots.resize(static_cast<size_t>(slot) + 1);
    std::vector<T>& v = slots[static_cast<size_t>(slot)];
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  }
  std::vector<std::vector<float>> floats_;
  std::vector<std::vector<int32_t>> ints_;
  std::vector<std::vector<uint8_t>> bytes_;
};

// What a model's forward pass needs: the layer's buffers and the FFN variant's (MoE, sparse).
struct ForwardScratch {
  Scratch layer, ffn;
  std::vector<ForwardBatch::SeqRun> runs;  // the batch's sequence runs
};

}  // namespace ferry
