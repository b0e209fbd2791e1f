// AVX-VNNI packed MatMul micro-kernel: the 256-bit body of avx2/packed_tile.h with vpdpbusd
// (u8 x s8, four products summed into each int32 lane) for the integer sums.
#include "kernels/avx2/packed_ops256.h"
#include "kernels/avx2/packed_tile.h"
#include "kernels/avx2vnni/avx2vnni.h"

namespace ferry::kernels::avx2vnni {
void PackedTile(const uint8_t* grp, const internal::PackedShape& sh, const internal::PackedAct* act, int nt,
                int n_grp, float* const* y) {
  packed256::PackedTile<packed256::Vnni256Ops>(grp, sh, act, nt, n_grp, y);
}

}  // namespace ferry::kernels::avx2vnni
