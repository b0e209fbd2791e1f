// MatMul against a naive double reference over dequantized weights and quantized-then-
// dequantized activations, plus batch invariance (bit-identical across n_tok and threads).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace ferry::kernels {
namespace {

using testing::Dequant;
using testing::MatMulTypes;
using testing::RandomFloats;
using testing::RandomRow;
using testing::ToPartner;

struct Problem {
  DType t;
  int64_t n_out, n_in, n_tok;
  std::vector<uint8_t> w;  // [n_out, RowBytes(t, n_in)]
  std::vector<float> x;    // [n_tok, n_in]
};

Problem MakeProblem(std::mt19937& rng, DType t, int64_t n_out, int64_t n_in, int64_t n_tok) {
  Problem p{t, n_out, n_in, n_tok, {}, RandomFloats(rng, n_in * n_tok)};
  const size_t rb = RowBytes(t, n_in);
  p.w.resize(rb * n_out);
  for (int64_t o = 0; o < n_out; ++o) {
    auto row = RandomRow(rng, t, n_in);
    std::memcpy(p.w.data() + o * rb, row.data(), rb);
  }
  return p;
}

std::vector<float> RunMatMul(const Problem& p, int64_t tok0, int64_t n_tok, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(n_tok * p.n_out));
  MatMul(p.w.data(), p.t, p.n_out, p.n_in, p.x.data() + tok0 * p.n_in, n_tok, y.data(), pool);
  return y;
}

TEST(MatMul, MatchesNaiveReference) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(20);
  ThreadPool pool(2);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (DType t : MatMulTypes()) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      ASSERT_TRUE(CanMatMul(t));
      const int64_t n_in = Traits(t).block_size == 1 ? 300 : 512;
      Problem p = MakeProblem(rng, t, 37, n_in, 5);
      auto y = RunMatMul(p, 0, p.n_tok, &pool);
      const size_t rb = RowBytes(t, n_in);
      for (int64_t tk = 0; tk < p.n_tok; ++tk) {
        auto xq = ToPartner(t, p.x.data() + tk * n_in, n_in);
        auto xf = Dequant(MatMulActivationType(t), xq.data(), n_in);
        for (int64_t o = 0; o < p.n_out; ++o) {
          auto wf = Dequant(t, p.w.data() + o * rb, n_in);
          double want = 0;
          for (int64_t i = 0; i < n_in; ++i) want += static_cast<double>(wf[i]) * xf[i];
          const double tol = (testing::UsesQ8_1(t) ? 2e-3 : 1e-5) * testing::AbsDot(wf, xf) + 1e-6;
          ASSERT_NEAR(y[tk * p.n_out + o], want, tol) << "t=" << tk << " o=" << o;
        }
      }
    }
  }
}

TEST(MatMul, BatchInvariantBitExact) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(21);
  ThreadPool pool2(2);
  ThreadPool pool1(1);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (DType t : MatMulTypes()) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t));
      const int64_t n_in = Traits(t).block_size == 1 ? 136 : 512;
      Problem p = MakeProblem(rng, t, 45, n_in, 7);
      const auto batch_serial = RunMatMul(p, 0, 7, nullptr);
      const auto batch_1 = RunMatMul(p, 0, 7, &pool1);
      const auto batch_2 = RunMatMul(p, 0, 7, &pool2);
      ASSERT_EQ(0, std::memcmp(batch_serial.data(), batch_1.data(), batch_1.size() * 4));
      ASSERT_EQ(0, std::memcmp(batch_serial.data(), batch_2.data(), batch_2.size() * 4));
      for (int64_t tk = 0; tk < 7; ++tk) {
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
          const auto alone = RunMatMul(p, tk, 1, pool);
          ASSERT_EQ(0, std::memcmp(alone.data(), batch_2.data() + tk * p.n_out, p.n_out * 4))
              << "token " << tk;
        }
      }
      // A sub-batch of 3 starting at token 2.
      const auto sub = RunMatMul(p, 2, 3, &pool2);
      ASSERT_EQ(0, std::memcmp(sub.data(), batch_2.data() + 2 * p.n_out, sub.size() * 4));
    }
  }
}

TEST(MatMul, LargeBatchUsesTilesConsistently) {
  std::mt19937 rng(22);
  ThreadPool pool(2);
  // More tokens than one token tile and more rows than one row block.
  Problem p = MakeProblem(rng, DType::kQ4_0, 300, 1024, 19);
  const auto all = RunMatMul(p, 0, 19, &pool);
  for (int64_t tk : {0, 8, 9, 18}) {
    const auto alone = RunMatMul(p, tk, 1, nullptr);
    ASSERT_EQ(0, std::memcmp(alone.data(), all.data() + tk * p.n_out, p.n_out * 4)) << tk;
  }
}

// A layout choice must not change results: on every table the in-place q4_0 / q8_0 / mxfp4 MatMul
// (--no-repack) gives the repacked MatMul's bits, for one token and for a batch, with a row
// count that leaves a partial packed group and block counts off the eight-block batches.
TEST(MatMul, InPlaceEqualsRepackedBitExact) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(23);
  ThreadPool pool(2);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kMXFP4}) {
      for (int64_t n_in : {32 * 9, 32 * 64}) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t) + " n_in=" + std::to_string(n_in));
        Problem p = MakeProblem(rng, t, 21, n_in, 6);
        std::vector<uint8_t> packed(PackedBytes(t, p.n_out, n_in));
        PackWeights(t, p.w.data(), p.n_out, n_in, packed.data(), nullptr);
        for (int64_t n_tok : {1, 6}) {
          const auto in_place = RunMatMul(p, 0, n_tok, &pool);
          std::vector<float> repacked(in_place.size());
          MatMulPacked(packed.data(), t, p.n_out, n_in, p.x.data(), n_tok, repacked.data(), &pool);
          for (size_t i = 0; i < in_place.size(); ++i)
            ASSERT_EQ(std::memcmp(&in_place[i], &repacked[i], 4), 0)
                << "n_tok=" << n_tok << " out " << i << ": " << in_place[i] << " vs " << repacked[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace ferry::kernels
