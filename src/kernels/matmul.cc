// MatMul: activations are converted once to the weight type's partner, then each thread
// streams a contiguous slice of weight rows, computing every y[t][o] with the same dot
// function (so results are bit-identical whatever n_tok or the thread count).
#include <algorithm>
#include <cstring>

#include "base/aligned_buffer.h"
#include "base/check.h"
#include "core/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels {
namespace {

// Tokens sharing one pass over a block of weight rows: the weight row stays in L1 while it
// meets each of these tokens' activation rows.
constexpr int64_t kTokenTile = 8;
// Bytes of weight rows per block (fits L2 with room for the token tile).
constexpr size_t kRowBlockBytes = 64 * 1024;

// Per-thread scratch for converted activations: [n_tok, act_row_bytes].
std::byte* Scratch(size_t bytes) {
  thread_local AlignedBuffer buf;
  if (buf.size() < bytes) buf = AlignedBuffer(std::max(bytes, buf.size() * 2));
  return static_cast<std::byte*>(buf.data());
}

}  // namespace

namespace internal {

size_t ActRowBytes(DType act, int64_t n) {
  const size_t nb = static_cast<size_t>(n / 32);
  if (act == DType::kQ8_0)
    return ActBlocksBytes(n / 32, sizeof(block_q8_0)) + nb * (sizeof(float) + sizeof(int32_t));
  if (act == DType::kQ8_1) return ActBlocksBytes(n / 32, sizeof(block_q8_1)) + nb * 2 * sizeof(float);
  return RowBytes(act, n);
}

void PrepareActRow(const KernelTable& tab, DType act, const float* x, void* dst, int64_t n) {
  tab.quantize_act[static_cast<int>(act)](x, dst, n);
  const int64_t nb = n / 32;
  auto* extra = static_cast<char*>(dst) + ActBlocksBytes(nb, RowBytes(act, 32));
  if (act == DType::kQ8_0) {
    const auto* b = static_cast<const block_q8_0*>(dst);
    for (int64_t i = 0; i < nb; ++i) {
      const float d = Fp16ToFp32(b[i].d);
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) sum += b[i].qs[j];
      std::memcpy(extra + 4 * i, &d, 4);
      std::memcpy(extra + 4 * (nb + i), &sum, 4);
    }
  } else if (act == DType::kQ8_1) {
    const auto* b = static_cast<const block_q8_1*>(dst);
    for (int64_t i = 0; i < nb; ++i) {
      const float d = Fp16ToFp32(b[i].d), s = Fp16ToFp32(b[i].s);
      std::memcpy(extra + 4 * i, &d, 4);
      std::memcpy(extra + 4 * (nb + i), &s, 4);
    }
  }
}

size_t AttnQueryBytes(DType k_type, int head_dim) {
  return AttnQueryIsQ8(k_type) ? ActRowBytes(DType::kQ8_0, head_dim) : 0;
}

const void* PrepareAttnQuery(const KernelTable& tab, DType k_type, const float* q, int head_dim, void* buf) {
  if (!AttnQueryIsQ8(k_type)) return q;
  PrepareActRow(tab, DType::kQ8_0, q, buf, head_dim);
  return buf;
}

}  // namespace internal

DType MatMulActivationType(DType t) {
  switch (t) {
    case DType::kF16:
      return DType::kF16;
    case DType::kBF16:
      return DType::kBF16;
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kMXFP4:
      return DType::kQ8_0;
    case DType::kQ4_1:
    case DType::kQ5_1:
      return DType::kQ8_1;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return DType::kQ8_K;
    default:
      return DType::kF32;
  }
}

bool CanMatMul(DType t) {
  const int i = static_cast<int>(t);
  return i < internal::kMaxDType && internal::Table().dot[i] != nullptr;
}

void MatMul(const void* w, DType w_type, int64_t n_out, int64_t n_in, const float* x, int64_t n_tok, float* y,
            ThreadPool* pool) {
  if (n_out <= 0 || n_tok <= 0) return;
  const internal::KernelTable& tab = internal::Table();
  const internal::DotFn dot = tab.dot[static_cast<int>(w_type)];
  const internal::DotTileFn dot_tile = tab.dot_tile[static_cast<int>(w_type)];
  const internal::DotRowsFn dot_rows = tab.dot_rows[static_cast<int>(w_type)];
  FERRY_CHECK(dot != nullptr);
  const DType act = MatMulActivationType(w_type);
  const size_t w_row = RowBytes(w_type, n_in);
  const auto* wb = static_cast<const std::byte*>(w);
  FERRY_DCHECK(n_in % Traits(w_type).block_size == 0);

  // xq: [n_tok, x_row] activations in the partner type.
  const std::byte* xq;
  size_t x_row;
  if (act == DType::kF32) {
    xq = reinterpret_cast<const std::byte*>(x);
    x_row = static_cast<size_t>(n_in) * sizeof(float);
  } else {
    x_row = internal::ActRowBytes(act, n_in);
    std::byte* buf = Scratch(x_row * static_cast<size_t>(n_tok));
    auto quant_range = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        internal::PrepareActRow(tab, act, x + t * n_in, buf + static_cast<size_t>(t) * x_row, n_in);
    };
    if (pool && pool->size() > 1 && n_tok >= 4) {
      pool->ParallelFor(n_tok, quant_range);
    } else {
      quant_range(0, n_tok);
    }
    xq = buf;
  }

  const int64_t row_block =
      std::clamp<int64_t>(static_cast<int64_t>(kRowBlockBytes / std::max<size_t>(w_row, 1)), 4, 256);
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t b0 = r0; b0 < r1; b0 += row_block) {
      const int64_t b1 = std::min(r1, b0 + row_block);
      for (int64_t t0 = 0; t0 < n_tok; t0 += kTokenTile) {
        const int64_t t1 = std::min(n_tok, t0 + kTokenTile);
        for (int64_t o = b0; o < b1; ++o) {
          const std::byte* wr = wb + static_cast<size_t>(o) * w_row;
          if (dot_tile && t1 - t0 > 1) {  // the row's weight-side work once per few tokens
            for (int64_t t = t0; t < t1; t += internal::kMaxDotTile) {
              const int nt = static_cast<int>(std::min<int64_t>(internal::kMaxDotTile, t1 - t));
              const void* xs[internal::kMaxDotTile];
              float out[internal::kMaxDotTile];
              for (int i = 0; i < nt; ++i) xs[i] = xq + static_cast<size_t>(t + i) * x_row;
              dot_tile(wr, xs, nt, n_in, out);
              for (int i = 0; i < nt; ++i) y[(t + i) * n_out + o] = out[i];
            }
          } else if (dot_rows) {  // a few rows per call: their serial float chains overlap
            const int nr = static_cast<int>(std::min<int64_t>(internal::kMaxDotRows, b1 - o));
            float out[internal::kMaxDotRows];
            for (int64_t t = t0; t < t1; ++t) {
              dot_rows(wr, w_row, xq + static_cast<size_t>(t) * x_row, nr, n_in, out);
              for (int r = 0; r < nr; ++r) y[t * n_out + o + r] = out[r];
            }
            o += nr - 1;
          } else {
            for (int64_t t = t0; t < t1; ++t)
              y[t * n_out + o] = dot(wr, xq + static_cast<size_t>(t) * x_row, n_in);
          }
        }
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
