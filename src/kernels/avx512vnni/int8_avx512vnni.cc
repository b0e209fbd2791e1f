// AVX512_VNNI W8A8 dots: int8_dot_body.h with 512-bit vpdpbusd (weights offset to w + 128).
#include "kernels/avx512/avx512_util.h"
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/int8_dot_body.h"
#include "kernels/x86_intrinsics.h"

namespace ferry::kernels::avx512vnni {
namespace {

struct VnniOps {
  using V = __m512i;
  static constexpr int64_t kBytes = 64;
  static constexpr uint32_t kBias = 128;
  static V Zero() { return _mm512_setzero_si512(); }
  static V Load(const int8_t* p) { return _mm512_loadu_si512(p); }
  static V Step(V acc, V w, V x) {
    return _mm512_dpbusd_epi32(acc, _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80))), x);
  }
  static V SumX(V sx, V x) { return _mm512_dpbusd_epi32(sx, _mm512_set1_epi8(1), x); }
  // By vector adds, which wrap: _mm512_reduce_add_epi32 ends in a signed int addition that
  // overflows (undefined) on the longest rows, whose sums are exact modulo 2^32 by design.
  static uint32_t Hsum(V a) {
    return static_cast<uint32_t>(avx512::HsumI32x8(_mm256_add_epi32(avx512::LoHalf(a), avx512::HiHalf(a))));
  }
};

}  // namespace

int32_t DotI8(const int8_t* w, const int8_t* x, int64_t n) {
  return int8_body::DotI8<VnniOps>(w, x, n);
}

void DotI8x4(const int8_t* w, int64_t w_stride, const int8_t* x, int64_t n, int32_t* out) {
  int8_body::DotI8x4<VnniOps>(w, w_stride, x, n, out);
}

}  // namespace ferry::kernels::avx512vnni
