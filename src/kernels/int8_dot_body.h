// W8A8 int8 x int8 dot bodies (DotI8, DotI8x4) as templates over a vector Ops struct, shared by
// the avx2vnni, avx512 and avx512vnni tables. Plain C++: each ISA folder's .cc supplies the
// intrinsics in its Ops and is compiled with its own flags; everything here has internal
// linkage, so instantiations for different ISAs never meet at link time.
//
// Ops: V (vector type), kBytes (int8 lanes per V), Zero(), Load(p), Step(acc, w, x) (adds
// products of w and x into int32 lanes), Hsum(acc) -> uint32, and kBias: VNNI multiplies
// u8 x s8, so weights enter as w + 128 (w may be -128) and kBias * sum(x) comes off at the end,
// with sum(x) from SumX(acc, x). The int32 lanes may wrap for long rows (|w + 128| * |x| reaches
// 255 * 127 per product), but the true sum fits int32 (n <= kMaxW8A8In) and wrapping adds are
// exact modulo 2^32, so the result is exact.
#pragma once

#include <cstdint>

namespace ferry::kernels::int8_body {
namespace {

template <typename Ops>
inline uint32_t Correction(typename Ops::V sx) {
  if constexpr (Ops::kBias != 0) return Ops::kBias * Ops::Hsum(sx);
  return 0;
}

template <typename Ops>
int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n) {
  using V = typename Ops::V;
  constexpr int64_t kB = Ops::kBytes;
  V acc0 = Ops::Zero(), acc1 = Ops::Zero(), sx = Ops::Zero();
  int64_t i = 0;
  for (; i + 2 * kB <= n; i += 2 * kB) {
    const V x0 = Ops::Load(x + i), x1 = Ops::Load(x + i + kB);
    acc0 = Ops::Step(acc0, Ops::Load(w + i), x0);
    acc1 = Ops::Step(acc1, Ops::Load(w + i + kB), x1);
    if constexpr (Ops::kBias != 0) sx = Ops::SumX(Ops::SumX(sx, x0), x1);
  }
  for (; i + kB <= n; i += kB) {
    const V x0 = Ops::Load(x + i);
    acc0 = Ops::Step(acc0, Ops::Load(w + i), x0);
    if constexpr (Ops::kBias != 0) sx = Ops::SumX(sx, x0);
  }
  uint32_t sum = Ops::Hsum(acc0) + Ops::Hsum(acc1) - Correction<Ops>(sx);
  for (; i < n; ++i) sum += static_cast<uint32_t>(static_cast<int32_t>(w[i]) * static_cast<int32_t>(x[i]));
  return static_cast<int32_t>(sum);
}

// Four weight rows against one activation row: each x load (and its sum) feeds four rows.
template <typename Ops>
void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out) {
  using V = typename Ops::V;
  constexpr int64_t kB = Ops::kBytes;
  V acc[4] = {Ops::Zero(), Ops::Zero(), Ops::Zero(), Ops::Zero()};
  V sx = Ops::Zero();
  int64_t i = 0;
  for (; i + kB <= n; i += kB) {
    const V xv = Ops::Load(x + i);
    for (int r = 0; r < 4; ++r) acc[r] = Ops::Step(acc[r], Ops::Load(w + r * w_stride + i), xv);
    if constexpr (Ops::kBias != 0) sx = Ops::SumX(sx, xv);
  }
  const uint32_t corr = Correction<Ops>(sx);
  for (int r = 0; r < 4; ++r) {
    uint32_t sum = Ops::Hsum(acc[r]) - corr;
    for (int64_t j = i; j < n; ++j)
      sum += static_cast<uint32_t>(static_cast<int32_t>(w[r * w_stride + j]) * static_cast<int32_t>(x[j]));
    out[r] = static_cast<int32_t>(sum);
  }
}

}  // namespace
}  // namespace ferry::kernels::int8_body
