// MatMulPacked: activations become q8_0 (q8_K for q4_K/q6_K) planes once per call (PreparePackedAct), then
// each thread takes a contiguous range of 8-row groups and, chunk by chunk (a chunk of weights stays in L2),
// runs the micro-kernel over tiles of up to 4 tokens. Every (token, row) sums its blocks in the same order in
// every tile, so results never depend on n_tok or threads.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/check.h"
#include "core/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/packed_layout.h"
#include "kernels/quant_blocks.h"

namespace ferry::kernels {
namespace {

// Weight bytes per cache chunk: the chunk stays in L2 (512 KiB on Zen 3) while every token
// tile meets it, so prefill reads weights from DRAM once per call.
constexpr size_t kChunkBytes = 128 * 1024;

// Per-thread scratch for the activation planes: [n_tok, PackedActBytes(n_in)].
uint8_t* ActScratch(size_t bytes) {
  thread_local AlignedBuffer buf;
  if (buf.size() < bytes) buf = AlignedBuffer(std::max(bytes, buf.size() * 2));
  return static_cast<uint8_t*>(buf.data());
}

}  // namespace

namespace internal {

void PreparePackedAct(DType weights, const float* x, int64_t n_in, void* dst) {
  const int64_t nb = (n_in + 31) / 32;
  auto* p = static_cast<uint8_t*>(dst);
  auto* qs = reinterpret_cast<int8_t*>(p);
  auto* d = reinterpret_cast<float*>(p + nb * 32);
  auto* s = reinterpret_cast<int32_t*>(p + nb * 36);
  if (weights == DType::kQ4_K || weights == DType::kQ6_K) {  // q8_K, as the in-place dots (n_in % 256 == 0)
    thread_local std::vector<block_q8_K> blocks;             // [n_in / 256]
    const int64_t nsb = n_in / kQK_K;
    if (blocks.size() < static_cast<size_t>(nsb)) blocks.resize(static_cast<size_t>(nsb));
    Table().quantize_act[static_cast<int>(DType::kQ8_K)](x, blocks.data(), n_in);
    for (int64_t i = 0; i < nsb; ++i) {
      const block_q8_K& blk = blocks[static_cast<size_t>(i)];
      std::memcpy(qs + i * kQK_K, blk.qs, kQK_K);
      d[i] = blk.d;
      if (weights == DType::kQ6_K) {  // q6_K's scales are per 16: bsums as they are
        for (int j = 0; j < kQK_K / 16; ++j) s[i * 16 + j] = blk.bsums[j];
      } else {
        for (int j = 0; j < kQK_K / 32; ++j) s[i * 8 + j] = blk.bsums[2 * j] + blk.bsums[2 * j + 1];
      }
    }
    return;
  }
  if (n_in % 32 != 0) {  // ragged int4 rows: quantize a zero-padded copy [nb * 32]
    thread_local std::vector<float> padded;
    padded.assign(static_cast<size_t>(nb * 32), 0.f);
    std::copy_n(x, n_in, padded.data());
    x = padded.data();
    n_in = nb * 32;
  }
  thread_local std::vector<block_q8_0> blocks;  // [nb]
  if (blocks.size() < static_cast<size_t>(nb)) blocks.resize(static_cast<size_t>(nb));
  Table().quantize_act[static_cast<int>(DType::kQ8_0)](x, blocks.data(), n_in);
  for (int64_t b = 0; b < nb; ++b) {
    std::memcpy(qs + b * 32, blocks[static_cast<size_t>(b)].qs, 32);
    d[b] = Fp16ToFp32(blocks[static_cast<size_t>(b)].d);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += blocks[static_cast<size_t>(b)].qs[i];
    s[b] = sum;
  }
}

void MatMulPackedGroup(const void* packed, DType t, int64_t n_out, int64_t n_in, int64_t int4_group,
                       const float* x, int64_t n_tok, float* y, ThreadPool* pool) {
  if (n_out <= 0 || n_tok <= 0) return;
  const KernelTable& tab = Table();
  const PackedShape sh = MakePackedShape(t, n_out, n_in, int4_group);
  FERRY_DCHECK(sh.is_int4() || (n_in % sh.group == 0 && n_in % 32 == 0 &&
                                (!(sh.is_q4_k() || sh.is_q6_k()) || n_in % 256 == 0)));
  const size_t act_row = PackedActBytes(n_in);
  uint8_t* act_buf = ActScratch(act_row * static_cast<size_t>(n_tok));
  auto quant_range = [&](int64_t t0, int64_t t1) {
    for (int64_t tk = t0; tk < t1; ++tk) PreparePackedAct(t, x + tk * n_in, n_in, act_buf + tk * act_row);
  };
  if (pool && pool->size() > 1 && n_tok >= 4) {
    pool->ParallelFor(n_tok, quant_range);
  } else {
    quant_range(0, n_tok);
  }

  const auto* wb = static_cast<const uint8_t*>(packed);
  const size_t grp_bytes = sh.RowGroupBytes();
  // Whole pairs of groups per chunk, so the 512-bit kernels (two groups a call) stay paired.
  const int64_t chunk =
      std::max<int64_t>(kMaxTileGroups, static_cast<int64_t>(kChunkBytes / grp_bytes) & ~int64_t{1});
  const int64_t full_groups = n_out / kPackRows;
  auto groups = [&](int64_t g0, int64_t g1) {
    PackedAct act[kMaxTileTokens];
    float* yp[kMaxTileTokens];
    float tail[kMaxTileTokens][kMaxTileGroups * kPackRows];  // outputs of a zero-padded last group
    for (int64_t c0 = g0; c0 < g1; c0 += chunk) {
      const int64_t c1 = std::min(g1, c0 + chunk);
      for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTileTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tok - t0));
        for (int i = 0; i < nt; ++i) act[i] = PackedActAt(act_buf + (t0 + i) * act_row, n_in);
        for (int64_t g = c0; g < c1; g += kMaxTileGroups) {
          const int n_grp = static_cast<int>(std::min<int64_t>(kMaxTileGroups, c1 - g));
          const bool full = g + n_grp <= full_groups;
          for (int i = 0; i < nt; ++i) yp[i] = full ? y + (t0 + i) * n_out + g * kPackRows : tail[i];
          tab.packed_tile(wb + static_cast<size_t>(g) * grp_bytes, sh, act, nt, n_grp, yp);
          if (!full) {
            for (int i = 0; i < nt; ++i)
              for (int64_t r = 0; r < n_grp * kPackRows && g * kPackRows + r < n_out; ++r)
                y[(t0 + i) * n_out + g * kPackRows + r] = tail[i][r];
          }
        }
      }
    }
  };
  if (pool && pool->size() > 1) {
    pool->ParallelFor(sh.n_groups(), groups);
  } else {
    groups(0, sh.n_groups());
  }
}

}  // namespace internal

void MatMulPacked(const void* packed, DType t, int64_t n_out, int64_t n_in, const float* x, int64_t n_tok,
                  float* y, ThreadPool* pool) {
  internal::MatMulPackedGroup(packed, t, n_out, n_in, internal::kInt4Group, x, n_tok, y, pool);
}

}  // namespace ferry::kernels
