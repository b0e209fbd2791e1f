// The avx512vnni table's own entries (the rest come from the table it extends: dispatch.cc).
#include "kernels/avx512vnni/avx512vnni.h"

namespace ferry::kernels::avx512vnni {

void Fill(internal::KernelTable& t) {
  // packed, W8A8, ops
  t.packed_tile = PackedTile;
  t.dot_i8 = DotI8;
  t.dot_i8x4 = DotI8x4;
  // in-place dots
  FillKQuantDots(t);
  // attention
  FillAttention(t);
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) t.dot[static_cast<int>(DType::kBF16)] = DotBf16Dp;
}

}  // namespace ferry::kernels::avx512vnni
