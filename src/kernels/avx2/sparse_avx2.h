// AVX2 pieces of the row-sparse products (kernels/sparse_matvec.cc).
#pragma once

#include <cstdint>

namespace ferry::kernels::avx2 {

// y[n] += a * float(w[n]) for f16 w: DequantizeRow(f16) then Axpy in one pass, with the same
// arithmetic as avx2::Axpy (so bit-identical to that pair).
void AxpyF16(float a, const uint16_t* w, float* y, int64_t n);

}  // namespace ferry::kernels::avx2
