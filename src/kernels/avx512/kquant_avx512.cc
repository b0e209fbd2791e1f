// AVX-512 (F+BW+VL+DQ) K-quant dots: kquant_512.h with vpmaddwd + vpaddd as the MAC.
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/kquant_512.h"

namespace ferry::kernels::avx512 {
namespace {
struct MaddOps {
  static __m512i MaddAcc(__m512i acc, __m512i a, __m512i b) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }
};
using KDots = KQuantDots512<MaddOps>;
}  // namespace

void FillKQuantDots(internal::KernelTable& t) {
  auto set = [&](DType d, internal::DotFn f, internal::DotTileFn tile) {
    t.dot[static_cast<int>(d)] = f;
    t.dot_tile[static_cast<int>(d)] = tile;
  };
  set(DType::kQ4_K, KDots::Q4_K, KDots::TileQ4_K);
  set(DType::kQ5_K, KDots::Q5_K, KDots::TileQ5_K);
  set(DType::kQ6_K, KDots::Q6_K, KDots::TileQ6_K);
}

}  // namespace ferry::kernels::avx512
