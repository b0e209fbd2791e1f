// BlockContent: access to the K/V bytes of the pool's physical blocks, for the prefix cache's
// tiers. The kv layer keeps bookkeeping only; the engine implements this over the tensors
// (model/PagedKvCache) so evicted blocks can be copied out and restored blocks copied back.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kv/block_pool.h"

namespace ferry::kv {

class BlockContent {
 public:
  virtual ~BlockContent() = default;
  // Bytes of one block's K/V in every layer.
  virtual size_t BlockBytes() const = 0;
  // Fail only when the bytes live elsewhere too (a model split over ranks) and a rank could
  // not be reached: then the caller must not keep (Read) or trust (Write) the block.
  virtual Status Read(BlockId block, uint8_t* out) const = 0;  // out: [BlockBytes()]
  virtual Status Write(BlockId block, const uint8_t* in) = 0;  // in: [BlockBytes()]
};

}  // namespace ferry::kv
