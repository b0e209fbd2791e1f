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

#if defined(__x86_64__) || defined(_M_X64)
#include "kernels/avx2/sparse_avx2.h"
#define FERRY_SPARSE_AVX2 1
#endif

namespace ferry::kernels {
namespace {

// Skipped rows break the hardware prefetcher's stream at every gap: ask for the next kept
// row while the current one is computed (a hint only; results do not depend on it).
inline void PrefetchRow(const std::byte* row, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off);
}

}  // namespace

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
    for (int64_t j = j0; j < j1; ++j) {
      if (j + 1 < j1) PrefetchRow(wb + static_cast<size_t>(rows[j + 1]) * w_row, w_row);
      y[j] = dot(wb + static_cast<size_t>(rows[j]) * w_row, xq, n_in);
    }
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
  FERRY_CHECK(n_out % Traits(wt_type).block_size == 0);
  const size_t w_row = RowBytes(wt_type, n_out);
  const auto* wb = static_cast<const std::byte*>(wt);
  // Whole rows are read front to back (one contiguous stream per neuron, what the hardware
  // prefetcher follows). Fixed blocks of kBlockRows rows sum into their own partial vector,
  // and the partials are added in block order: the same sums whatever the thread count.
  constexpr int64_t kBlockRows = 32;
  // f16 rows on AVX2+: convert and accumulate in one pass (the scalar path is the reference).
  bool f16_fused = false;
#ifdef FERRY_SPARSE_AVX2
  f16_fused = wt_type == DType::kF16 && ActiveIsa() != Isa::kScalar;
#endif
  const int64_t n_blocks = (n_rows + kBlockRows - 1) / kBlockRows;
  std::vector<float> partial(static_cast<size_t>(n_blocks * n_out), 0.0f);  // [n_blocks, n_out]
  auto work = [&](int64_t b0, int64_t b1) {
    std::vector<float> tmp(wt_type == DType::kF32 ? 0 : static_cast<size_t>(n_out));  // [n_out] one row
    for (int64_t b = b0; b < b1; ++b) {
      float* acc = partial.data() + b * n_out;
      for (int64_t j = b * kBlockRows; j < std::min(n_rows, (b + 1) * kBlockRows); ++j) {
        const std::byte* row = wb + static_cast<size_t>(rows[j]) * w_row;
        if (j + 1 < n_rows) PrefetchRow(wb + static_cast<size_t>(rows[j + 1]) * w_row, w_row);
        if (wt_type == DType::kF32) {
          tab.axpy(h[j], reinterpret_cast<const float*>(row), acc, n_out);
#ifdef FERRY_SPARSE_AVX2
        } else if (f16_fused) {
          avx2::AxpyF16(h[j], reinterpret_cast<const uint16_t*>(row), acc, n_out);
#endif
        } else {
          DequantizeRow(wt_type, row, tmp.data(), n_out);
          tab.axpy(h[j], tmp.data(), acc, n_out);
        }
      }
    }
  };
  if (pool && pool->size() > 1 && n_blocks >= 2) {
    pool->ParallelFor(n_blocks, work);
  } else {
    work(0, n_blocks);
  }
  for (int64_t b = 0; b < n_blocks; ++b) tab.axpy(1.0f, partial.data() + b * n_out, y, n_out);
}

}  // namespace ferry::kernels
