// The avx2vnni table's own entries (the rest come from the table it extends: dispatch.cc).
#include "kernels/avx2vnni/avx2vnni.h"

namespace ferry::kernels::avx2vnni {

void Fill(internal::KernelTable& t) {
  // packed, W8A8, ops
  t.packed_tile = PackedTile;
  t.dot_i8 = DotI8;
  t.dot_i8x4 = DotI8x4;
  // in-place dots
  FillKQuantDots(t);
  // attention
  FillAttention(t);
}

}  // namespace ferry::kernels::avx2vnni
