// Row-sparse products for contextual FFN sparsity: MatVecRows reads only the selected weight
// rows (up/gate), AxpyRows only the selected rows of a transposed down projection. Both use the
// dispatch table's dot / axpy, so the scalar table is their reference and every ISA agrees
// with MatMul on the rows it computes.
#include <algorithm>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {

void MatVecRows(const void* w, DType w_type, int64_t n_in, const int32_t* rows, int64_t n_rows,
                const float* x, float* y, ThreadPool* pool) {
  if (n_rows <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const internal::DotFn dot = tab.dot[static_cast<int>(w_type)];
  FERRY_CHECK(dot != nullptr);
  const DType act = MatMulActivationType(w_type);
  const size_t w_row = RowBytes(w_type, n_in);
  const auto* wb = static_cast<const std::byte*>(w);
  const void* xq = x;
  AlignedBuffer buf;  // [ActRowBytes] x in the partner type
  if (act != DType::kF32) {
    buf = AlignedBuffer(internal::ActRowBytes(act, n_in));
    internal::PrepareActRow(tab, act, x, buf.data(), n_in);
    xq = buf.data();
  }
  auto work = [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) y[j] = dot(wb + static_cast<size_t>(rows[j]) * w_row, xq, n_in);
  };
  if (pool && pool->size() > 1 && n_rows >= 64) {
    pool->ParallelFor(n_rows, work);
  } else {
    work(0, n_rows);
  }
}

void AxpyRows(const void* wt, DType wt_type, int64_t n_out, const int32_t* rows, const float* h,
              int64_t n_rows, float* y, ThreadPool* pool) {
  std::fill(y, y + n_out, 0.0f);
  if (n_rows <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const int64_t block = Traits(wt_type).block_size;
  FERRY_CHECK(n_out % block == 0);
  const size_t w_row = RowBytes(wt_type, n_out);
  const auto* wb = static_cast<const std::byte*>(wt);
  // Column chunks of whole blocks (>= 64 floats) so threads never share an output element.
  const int64_t chunk = std::max<int64_t>(block, (64 + block - 1) / block * block);
  const int64_t n_chunks = (n_out + chunk - 1) / chunk;
  auto work = [&](int64_t c0, int64_t c1) {
    std::vector<float> tmp(static_cast<size_t>(chunk));  // [chunk] one dequantized row piece
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t col0 = c * chunk, cols = std::min(chunk, n_out - col0);
      const size_t off = RowBytes(wt_type, col0);
      for (int64_t j = 0; j < n_rows; ++j) {
        const std::byte* row = wb + static_cast<size_t>(rows[j]) * w_row + off;
        if (wt_type == DType::kF32) {
          tab.axpy(h[j], reinterpret_cast<const float*>(row), y + col0, cols);
        } else {
          DequantizeRow(wt_type, row, tmp.data(), cols);
          tab.axpy(h[j], tmp.data(), y + col0, cols);
        }
      }
    }
  };
  if (pool && pool->size() > 1 && n_chunks >= 2) {
    pool->ParallelFor(n_chunks, work);
  } else {
    work(0, n_chunks);
  }
}

}  // namespace ferry::kernels
