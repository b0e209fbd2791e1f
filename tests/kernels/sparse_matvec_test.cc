// Row-sparse products against the dense kernels with the same mask: MatVecRows must equal
// MatMul's selected rows bit for bit (same activation conversion, same dot), AxpyRows the
// masked dense down projection; every ISA against the scalar table, ragged sizes included.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "isa_guard.h"
#include "kernels/kernels.h"

namespace ferry::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(seed >> 8) % 2001 - 1000) / 1000.0f;
  }
  return v;
}

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& w, int64_t rows, int64_t cols) {
  const size_t rb = RowBytes(t, cols);
  std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    QuantizeRow(t, w.data() + r * cols, q.data() + rb * static_cast<size_t>(r), cols);
  return q;
}

class SparseMatVecTest : public ::testing::TestWithParam<DType> {};

TEST_P(SparseMatVecTest, RowsEqualDenseMatMulRowsBitExact) {
  ferry::testing::ScopedIsa isa_guard;
  const DType t = GetParam();
  ThreadPool pool(2);
  for (Isa isa : ferry::testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (int64_t n_out : {1, 37, 300}) {
      const int64_t n_in = 256;
      auto w = Quantize(t, Random(n_out * n_in, 3), n_out, n_in);
      auto x = Random(n_in, 5);
      std::vector<float> dense(static_cast<size_t>(n_out));
      MatMul(w.data(), t, n_out, n_in, x.data(), 1, dense.data(), nullptr);
      std::vector<int32_t> rows;
      for (int32_t r = 0; r < n_out; ++r)
        if ((r * 7) % 3 != 0 || r == n_out - 1) rows.push_back(r);  // a ragged mask incl. the last row
      std::vector<float> y(rows.size());
      MatVecRows(w.data(), t, n_in, rows.data(), static_cast<int64_t>(rows.size()), x.data(), y.data(),
                 &pool);
      for (size_t j = 0; j < rows.size(); ++j)
        ASSERT_EQ(y[j], dense[static_cast<size_t>(rows[j])]) << IsaName(isa) << " row " << rows[j];
    }
  }
}

TEST_P(SparseMatVecTest, AxpyRowsEqualsMaskedDenseDown) {
  ferry::testing::ScopedIsa isa_guard;
  const DType t = GetParam();
  ThreadPool pool(2);
  const int64_t n_neurons = 96, n_out = 320;  // 320: chunks of 64 with none ragged; 5 chunks
  auto wt_f = Random(n_neurons * n_out, 9);
  auto wt = Quantize(t, wt_f, n_neurons, n_out);
  std::vector<float> deq(wt_f.size());
  for (int64_t r = 0; r < n_neurons; ++r)
    DequantizeRow(t, wt.data() + RowBytes(t, n_out) * static_cast<size_t>(r), deq.data() + r * n_out, n_out);
  auto h = Random(n_neurons, 4);
  std::vector<int32_t> rows;
  std::vector<float> hs;
  for (int32_t j = 0; j < n_neurons; ++j)
    if (j % 4 != 1) {
      rows.push_back(j);
      hs.push_back(h[static_cast<size_t>(j)]);
    }
  std::vector<float> ref(static_cast<size_t>(n_out), 0.0f);
  for (size_t j = 0; j < rows.size(); ++j)
    for (int64_t o = 0; o < n_out; ++o)
      ref[static_cast<size_t>(o)] += hs[j] * deq[static_cast<size_t>(rows[j] * n_out + o)];
  std::vector<float> scalar;
  for (Isa isa : ferry::testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    std::vector<float> y(static_cast<size_t>(n_out), 123.0f);
    AxpyRows(wt.data(), t, n_out, rows.data(), hs.data(), static_cast<int64_t>(rows.size()), y.data(), &pool);
    for (int64_t o = 0; o < n_out; ++o)
      ASSERT_NEAR(y[static_cast<size_t>(o)], ref[static_cast<size_t>(o)], 1e-4) << o;
    // Thread count never changes a bit.
    std::vector<float> y1(static_cast<size_t>(n_out));
    AxpyRows(wt.data(), t, n_out, rows.data(), hs.data(), static_cast<int64_t>(rows.size()), y1.data(),
             nullptr);
    EXPECT_EQ(y, y1) << IsaName(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, SparseMatVecTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace ferry::kernels
