// AVX512-VNNI in-place dots: kquant_512.h with vpdpwssd as the MAC (the avx512 table's bits),
// and the q4_0 / q8_0 chains of dot_chain_256.h with 256-bit vpdpbusd (the chain is serial, so
// wider registers buy nothing there).
#include "kernels/avx2/dot_chain_256.h"
#include "kernels/avx512/kquant_512.h"
#include "kernels/avx512vnni/avx512vnni.h"

namespace ferry::kernels::avx512vnni {
namespace {
struct VnniOps {
  static __m512i MaddAcc(__m512i acc, __m512i a, __m512i b) { return _mm512_dpwssd_epi32(acc, a, b); }
};
using KDots = avx512::KQuantDots512<VnniOps>;
struct VnniSums {
  static __m256i DotU8(__m256i u, __m256i y) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, y); }
  static __m256i DotI8(__m256i x, __m256i y) { return DotU8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }
};
using Chain = avx2::ChainDots256<VnniSums>;
}  // namespace

void FillKQuantDots(internal::KernelTable& t) {
  auto set = [&](DType d, internal::DotFn f, internal::DotTileFn tile) {
    t.dot[static_cast<int>(d)] = f;
    t.dot_tile[static_cast<int>(d)] = tile;
  };
  set(DType::kQ4_K, KDots::Q4_K, KDots::TileQ4_K);
  set(DType::kQ5_K, KDots::Q5_K, KDots::TileQ5_K);
  set(DType::kQ6_K, KDots::Q6_K, KDots::TileQ6_K);
  set(DType::kQ4_0, Chain::Q4_0, nullptr);
  set(DType::kQ8_0, Chain::Q8_0, nullptr);
  t.dot_rows[static_cast<int>(DType::kQ4_0)] = Chain::RowsQ4_0;
  t.dot_rows[static_cast<int>(DType::kQ8_0)] = Chain::RowsQ8_0;
}

}  // namespace ferry::kernels::avx512vnni
