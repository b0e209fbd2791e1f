// Table entries for the in-place dots, shared by the ISA folders' FillKQuantDots: a table that
// computes the K-quants with a KQuantDots256/512 instantiation, or q4_0/q8_0 with a ChainDots256
// one, sets the same entries whatever the MAC. No intrinsics here: it only takes addresses.
#pragma once

#include "kernels/dispatch.h"

namespace ferry::kernels::internal {

// q4_K / q5_K / q6_K dot and dot_tile from KDots.
template <typename KDots>
void SetKQuantDots(KernelTable& t) {
  t.dot[static_cast<int>(DType::kQ4_K)] = KDots::Q4_K;
  t.dot_tile[static_cast<int>(DType::kQ4_K)] = KDots::TileQ4_K;
  t.dot[static_cast<int>(DType::kQ5_K)] = KDots::Q5_K;
  t.dot_tile[static_cast<int>(DType::kQ5_K)] = KDots::TileQ5_K;
  t.dot[static_cast<int>(DType::kQ6_K)] = KDots::Q6_K;
  t.dot_tile[static_cast<int>(DType::kQ6_K)] = KDots::TileQ6_K;
}

// q4_0 / q8_0 / mxfp4 dot and dot_rows from Chain (no tiles: MatMul uses dot_rows instead).
template <typename Chain>
void SetChainDots(KernelTable& t) {
  t.dot[static_cast<int>(DType::kQ4_0)] = Chain::Q4_0;
  t.dot_tile[static_cast<int>(DType::kQ4_0)] = nullptr;
  t.dot_rows[static_cast<int>(DType::kQ4_0)] = Chain::RowsQ4_0;
  t.dot[static_cast<int>(DType::kQ8_0)] = Chain::Q8_0;
  t.dot_tile[static_cast<int>(DType::kQ8_0)] = nullptr;
  t.dot_rows[static_cast<int>(DType::kQ8_0)] = Chain::RowsQ8_0;
  t.dot[static_cast<int>(DType::kMXFP4)] = Chain::MXFP4;
  t.dot_tile[static_cast<int>(DType::kMXFP4)] = nullptr;
  t.dot_rows[static_cast<int>(DType::kMXFP4)] = Chain::RowsMXFP4;
}

}  // namespace ferry::kernels::internal
