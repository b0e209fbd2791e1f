// Int8KeyCopy: progressive attention's INT8 copy of a KV cache's keys (model/attention_sparsity.h).
// It holds one int8 per key value in the cache's slot order ([slots, n_kv_heads, head_dim],
// whatever type the keys are stored in: model/kv_storage.h addresses it by slot * n_kv_heads *
// head_dim), and every copy the cache makes of its keys (copy-on-write, compaction) is made
// here too. One f32 scale per head_dim-long row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "kernels/kernels.h"

namespace ferry {

class Int8KeyCopy {
 public:
  bool enabled() const { return keys_.size() > 0; }
  // Allocates the copy, zeroed, for a key buffer of `key_elems` floats (a multiple of head_dim).
  // `lower_flag` names the option that shrinks the cache, for the out-of-memory error.
  Status Allocate(size_t key_elems, int32_t head_dim, std::string_view lower_flag);
  // The INT8 row and the scales at f32-key element offset `elem` (a row start); null unless enabled.
  int8_t* Keys(size_t elem) { return enabled() ? keys_.as<int8_t>() + elem : nullptr; }
  const int8_t* Keys(size_t elem) const { return enabled() ? keys_.as<int8_t>() + elem : nullptr; }
  float* Scales(size_t elem) { return enabled() ? scales_.as<float>() + elem / head_dim_ : nullptr; }
  const float* Scales(size_t elem) const {
    return enabled() ? scales_.as<float>() + elem / head_dim_ : nullptr;
  }
  // Points `view` (whose keys start at f32-key element `elem`) at the copy; no-op unless enabled.
  void Attach(kernels::KvBlocks& view, size_t elem) const;
  // Copies `elems` key elements (whole rows) from offset `src` to `dst`; no-op unless enabled.
  void Copy(size_t dst, size_t src, size_t elems);
  size_t Bytes() const { return keys_.size() + scales_.size(); }

 private:
  size_t head_dim_ = 1;
  AlignedBuffer keys_;    // [key_elems] int8, the f32 keys' layout
  AlignedBuffer scales_;  // [key_elems / head_dim] f32
};

}  // namespace ferry
