// AVX512-BF16 dot of bf16 rows: vdpbf16ps multiplies 32 bf16 pairs and adds them into 16 float
// lanes per instruction (products exact, sums rounded, denormals flushed as the instruction
// defines), four accumulators over 128 elements a step, a masked load for the ragged tail.
// Reached only where the CPU reports avx512bf16 (table_avx512vnni.cc checks).
#include "kernels/avx512/avx512_util.h"
#include "kernels/avx512vnni/avx512vnni.h"

namespace ferry::kernels::avx512vnni {
namespace {

inline __m512bh LoadBf16x32(const uint16_t* p, __mmask32 m) {
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, p));
}

}  // namespace

float DotBf16Dp(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  constexpr __mmask32 kAll = 0xFFFFFFFFu;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    acc0 = _mm512_dpbf16_ps(acc0, LoadBf16x32(a + i, kAll), LoadBf16x32(b + i, kAll));
    acc1 = _mm512_dpbf16_ps(acc1, LoadBf16x32(a + i + 32, kAll), LoadBf16x32(b + i + 32, kAll));
    acc2 = _mm512_dpbf16_ps(acc2, LoadBf16x32(a + i + 64, kAll), LoadBf16x32(b + i + 64, kAll));
    acc3 = _mm512_dpbf16_ps(acc3, LoadBf16x32(a + i + 96, kAll), LoadBf16x32(b + i + 96, kAll));
  }
  for (; i + 32 <= n; i += 32)
    acc0 = _mm512_dpbf16_ps(acc0, LoadBf16x32(a + i, kAll), LoadBf16x32(b + i, kAll));
  if (i < n) {
    const auto m = static_cast<__mmask32>((1ull << (n - i)) - 1);
    acc1 = _mm512_dpbf16_ps(acc1, LoadBf16x32(a + i, m), LoadBf16x32(b + i, m));
  }
  return avx512::HsumF32x16(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace ferry::kernels::avx512vnni
