// The avx512 table's own entries (the rest are the AVX2 kernels, which these CPUs also run).
#include "kernels/avx512/avx512.h"

namespace ferry::kernels::avx512 {

void Fill(internal::KernelTable& t) {
  t.read_sum = ReadSum;
  // in-place dots
  FillKQuantDots(t);
  t.dot[static_cast<int>(DType::kF32)] = DotF32;
  t.dot[static_cast<int>(DType::kF16)] = DotF16;
  t.dot[static_cast<int>(DType::kBF16)] = DotBf16;
}

}  // namespace ferry::kernels::avx512
