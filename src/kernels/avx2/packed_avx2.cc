// AVX2 packed MatMul micro-kernel: the 256-bit body of packed_tile.h with maddubs + madd for
// the integer sums (the sign trick for signed 8-bit weights).
#include "kernels/avx2/avx2.h"
#include "kernels/avx2/packed_ops256.h"
#include "kernels/avx2/packed_tile.h"

namespace ferry::kernels::avx2 {
void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  packed256::PackedTile<packed256::Avx2Ops>(grp, sh, act, nt, n_grp, y);
}

}  // namespace ferry::kernels::avx2
