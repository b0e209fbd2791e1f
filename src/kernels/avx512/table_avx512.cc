// The avx512 table's own entries (the rest are the AVX2 kernels, which these CPUs also run).
#include "kernels/avx512/avx512.h"

namespace ferry::kernels::avx512 {

void Fill(internal::KernelTable& t) {
  // packed, W8A8, ops
  t.packed_tile = PackedTile;
  t.quantize_i8 = QuantizeActInt8;
  t.dot_i8 = DotI8;
  t.dot_i8x4 = DotI8x4;
  t.read_sum = ReadSum;
  // in-place dots
  FillKQuantDots(t);
  t.dot[static_cast<int>(DType::kF32)] = DotF32;
  t.dot[static_cast<int>(DType::kF16)] = DotF16;
  t.dot[static_cast<int>(DType::kBF16)] = DotBf16;
  // attention
  FillAttention(t);
}

}  // namespace ferry::kernels::avx512
