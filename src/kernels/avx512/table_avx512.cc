// The avx512 table's own entries (the rest are the AVX2 kernels, which these CPUs also run).
#include "kernels/avx512/avx512.h"

namespace ferry::kernels::avx512 {

void Fill(internal::KernelTable& t) {
  t.read_sum = ReadSum;
  // attention
  FillAttention(t);
}

}  // namespace ferry::kernels::avx512
