// AVX-VNNI integer P.V for q8_0 / q4_0 V: pv_int_256.h with vpdpwssd as the multiply-add (the
// avx2 table's bits in one instruction instead of two).
#include "kernels/avx2/pv_int_256.h"
#include "kernels/avx2vnni/avx2vnni.h"

namespace ferry::kernels::avx2vnni {
namespace {
// pv_int_256.h's Ops. MaddAcc is inline asm, as avx512vnni's: with the intrinsic GCC 12 copies
// each accumulator to another register and back around every vpdpwssd. {vex}: the AVX-VNNI
// encoding (registers 0-15).
struct VnniOps {
  static __m256i MaddAcc(__m256i acc, __m256i a, __m256i b) {
    asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
  }
  static __m256i Broadcast(int32_t x) { return _mm256_set1_epi32(x); }
};
}  // namespace

void FillAttention(internal::KernelTable& t) {
  t.attn_pv_int[static_cast<int>(DType::kQ8_0)] = pv_int::AttnPvInt<pv256::Kernel<VnniOps>, DType::kQ8_0>;
  t.attn_pv_int[static_cast<int>(DType::kQ4_0)] = pv_int::AttnPvInt<pv256::Kernel<VnniOps>, DType::kQ4_0>;
}

}  // namespace ferry::kernels::avx2vnni
