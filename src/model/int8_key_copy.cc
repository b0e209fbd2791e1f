#include "model/int8_key_copy.h"

#include <cstring>
#include <new>

#include "base/check.h"

namespace ferry {

Status Int8KeyCopy::Allocate(size_t key_elems, int32_t head_dim, std::string_view lower_flag) {
  if (enabled()) return Status::Ok();
  FERRY_CHECK(head_dim > 0 && key_elems % static_cast<size_t>(head_dim) == 0);
  head_dim_ = static_cast<size_t>(head_dim);
  try {
    keys_ = AlignedBuffer(key_elems);
    scales_ = AlignedBuffer(key_elems / head_dim_ * sizeof(float));
  } catch (const std::bad_alloc&) {
    keys_ = AlignedBuffer();
    return ResourceExhaustedError(
        "cannot allocate the INT8 key copy ({} MiB) for --attn-progressive; lower {}", key_elems >> 20,
        lower_flag);
  }
  // Zeroed: keys written before this call have no copy (the model enables it before its first pass).
  keys_.Zero();
  scales_.Zero();
  return Status::Ok();
}

void Int8KeyCopy::Attach(kernels::KvBlocks& view, size_t elem) const {
  if (!enabled()) return;
  view.k_i8 = Keys(elem);
  view.k_i8_scale = Scales(elem);
}

void Int8KeyCopy::Copy(size_t dst, size_t src, size_t elems) {
  if (!enabled()) return;
  FERRY_DCHECK(dst % head_dim_ == 0 && src % head_dim_ == 0 && elems % head_dim_ == 0);
  std::memmove(Keys(dst), Keys(src), elems);
  std::memmove(Scales(dst), Scales(src), elems / head_dim_ * sizeof(float));
}

}  // namespace ferry
