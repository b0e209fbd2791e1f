// W8A8 MatMul: each token's activations are quantized to int8 once per call (dynamic
// per-token or static per-tensor scale), then threads split the weight rows; four rows share
// each activation load, and a tile of tokens reuses rows while they are in L1/L2. Integer sums
// are exact and the float epilogue is fixed, so y[t] never depends on n_tok, tiling or threads.
#include <algorithm>

#include "base/aligned_buffer.h"
#include "base/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace ferry::kernels {
namespace {

constexpr int64_t kTokenTile = 8;              // tokens sharing one pass over a row block
constexpr int64_t kRowBlockBytes = 64 * 1024;  // weight bytes per row block (L2-resident)

// Per-thread scratch: [n_tok, n_in] int8 activations then [n_tok] float scales.
std::byte* Scratch(size_t bytes) {
  thread_local AlignedBuffer buf;
  if (buf.size() < bytes) buf = AlignedBuffer(std::max(bytes, buf.size() * 2));
  return static_cast<std::byte*>(buf.data());
}

}  // namespace

float QuantizeActInt8(const float* x, int64_t n, float static_scale, int8_t* q) {
  return internal::Table().quantize_i8(x, n, static_scale, q);
}

void MatMulW8A8(const int8_t* w, const float* w_scale, int64_t n_out, int64_t n_in, const float* x,
                int64_t n_tok, float input_scale, float* y, ThreadPool* pool) {
  if (n_out <= 0 || n_tok <= 0) return;
  FERRY_CHECK(n_in > 0 && n_in <= kMaxW8A8In);
  const internal::KernelTable& tab = internal::Table();
  const size_t x_row = (static_cast<size_t>(n_in) + 63) & ~size_t{63};  // 64-byte aligned rows
  std::byte* buf = Scratch(x_row * static_cast<size_t>(n_tok) + static_cast<size_t>(n_tok) * sizeof(float));
  auto* xq = reinterpret_cast<int8_t*>(buf);                                      // [n_tok, x_row]
  auto* xs = reinterpret_cast<float*>(buf + x_row * static_cast<size_t>(n_tok));  // [n_tok]
  auto quant_range = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      xs[t] = tab.quantize_i8(x + t * n_in, n_in, input_scale, xq + static_cast<size_t>(t) * x_row);
  };
  if (pool && pool->size() > 1 && n_tok >= 4) {
    pool->ParallelFor(n_tok, quant_range);
  } else {
    quant_range(0, n_tok);
  }

  const int64_t row_block = std::clamp<int64_t>(kRowBlockBytes / n_in, 4, 256) & ~int64_t{3};
  auto emit = [&](int64_t t, int64_t o, int32_t isum) {
    y[t * n_out + o] = static_cast<float>(isum) * (xs[t] * w_scale[o]);
  };
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t b0 = r0; b0 < r1; b0 += row_block) {
      const int64_t b1 = std::min(r1, b0 + row_block);
      for (int64_t t0 = 0; t0 < n_tok; t0 += kTokenTile) {
        const int64_t t1 = std::min(n_tok, t0 + kTokenTile);
        int64_t o = b0;
        for (; o + 4 <= b1; o += 4) {
          for (int64_t t = t0; t < t1; ++t) {
            int32_t s[4];
            tab.dot_i8x4(w + o * n_in, n_in, xq + static_cast<size_t>(t) * x_row, n_in, s);
            for (int r = 0; r < 4; ++r) emit(t, o + r, s[r]);
          }
        }
        for (; o < b1; ++o)
          for (int64_t t = t0; t < t1; ++t)
            emit(t, o, tab.dot_i8(w + o * n_in, xq + static_cast<size_t>(t) * x_row, n_in));
      }
    }
  };
  if (pool && pool->size() > 1) {
    pool->ParallelFor(n_out, rows);
  } else {
    rows(0, n_out);
  }
}

}  // namespace ferry::kernels
