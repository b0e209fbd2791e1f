// StackRows: q|k|v and gate|up stacked into one packed Linear give each part's output bit for
// bit (the fusion never changes a model's numbers), for every packable type and ragged n_out.
#include "model/linear.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace ferry {
namespace {

std::vector<uint8_t> RandomRows(std::mt19937& rng, DType t, int64_t n_out, int64_t n_in) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n_in));
  std::vector<uint8_t> rows(RowBytes(t, n_in) * static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    for (auto& v : x) v = d(rng);
    kernels::QuantizeRow(t, x.data(), rows.data() + RowBytes(t, n_in) * static_cast<size_t>(o), n_in);
  }
  return rows;
}

TEST(Linear, StackedRowsEqualEachPartBitForBit) {
  std::mt19937 rng(90);
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kI4G128}) {
    SCOPED_TRACE(DTypeName(t));
    const int64_t n_in = 256, n_tok = 3;
    const int64_t n_outs[] = {20, 13, 13};  // not multiples of the 8-row groups
    std::vector<std::vector<uint8_t>> storage;
    std::vector<Linear> parts;
    for (int64_t n_out : n_outs) {
      storage.push_back(RandomRows(rng, t, n_out, n_in));
      Linear lin{storage.back().data(), t, n_out, n_in, storage.back().size(), nullptr, nullptr, 0.f};
      lin.MaybePack(/*repack=*/true, &pool);
      ASSERT_TRUE(lin.packed);
      parts.push_back(lin);
    }
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n_tok * n_in));  // [n_tok, n_in]
    for (auto& v : x) v = d(rng);
    std::vector<std::vector<float>> want;
    for (const Linear& p : parts) {
      want.emplace_back(static_cast<size_t>(n_tok * p.n_out));
      p.Apply(x.data(), n_tok, want.back().data(), &pool);
    }
    Linear stacked = StackRows({&parts[0], &parts[1], &parts[2]}, &pool);
    ASSERT_EQ(stacked.n_out, 46);
    std::vector<float> y(static_cast<size_t>(n_tok * stacked.n_out));  // [n_tok, 46]
    stacked.Apply(x.data(), n_tok, y.data(), &pool);
    for (int64_t tk = 0; tk < n_tok; ++tk) {
      int64_t off = 0;
      for (size_t pi = 0; pi < parts.size(); ++pi) {
        const int64_t n_out = parts[pi].n_out;
        ASSERT_EQ(0,
                  std::memcmp(y.data() + tk * stacked.n_out + off, want[pi].data() + tk * n_out, n_out * 4))
            << "part " << pi << " token " << tk;
        off += n_out;
      }
    }
    // The parts still compute on their own (in place, or packed for int4).
    std::vector<float> again(want[1].size());
    parts[1].Apply(x.data(), n_tok, again.data(), &pool);
    for (size_t i = 0; i < again.size(); ++i)
      ASSERT_NEAR(again[i], want[1][i], 1e-3f * (1 + std::fabs(want[1][i])));
  }
}

TEST(Linear, UnpackedPartsAreNotStacked) {
  std::vector<uint8_t> rows(RowBytes(DType::kF32, 8) * 4);
  Linear a{rows.data(), DType::kF32, 4, 8, rows.size(), nullptr, nullptr, 0.f}, b = a;
  EXPECT_EQ(StackRows({&a, &b}, nullptr).n_out, 0);
}

}  // namespace
}  // namespace ferry
