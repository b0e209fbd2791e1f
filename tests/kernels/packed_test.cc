// Packed weights: pack/unpack round trip, int4 quantization, the packed MatMul against a naive
// double reference, bit-exactness across ISAs (the scalar twin) and batch invariance.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace ferry::kernels {
namespace {

using internal::PackedShape;

struct Case {
  DType t;
  int64_t group;  // the type's block: FerryInt4Group for Ferry int4, 32 otherwise
  std::string Name() const { return DTypeName(t); }
};
const Case kCases[] = {{DType::kQ4_0, 32},
                       {DType::kQ8_0, 32},
                       {DType::kMXFP4, 32},
                       {DType::kQ4_K, 32},
                       {DType::kQ6_K, 32},
                       {DType::kI4G32, FerryInt4Group(DType::kI4G32)},
                       {DType::kI4G64, FerryInt4Group(DType::kI4G64)},
                       {DType::kI4G128, FerryInt4Group(DType::kI4G128)}};

struct Weights {
  PackedShape sh;
  std::vector<uint8_t> rows;    // [n_out, SrcRowBytes]
  std::vector<uint8_t> packed;  // [TotalBytes]
};

// q4_K and q6_K rows are whole 256-element super-blocks and meet q8_K activations.
bool IsKQuant(DType t) {
  return t == DType::kQ4_K || t == DType::kQ6_K;
}

std::vector<float> DequantRow(const Case& c, const uint8_t* row, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  if (IsFerryInt4(c.t)) {
    ref::DequantizeRowInt4(row, y.data(), n, c.group);
  } else {
    ref::DequantizeRow(c.t, row, y.data(), n);
  }
  return y;
}

Weights MakeWeights(std::mt19937& rng, const Case& c, int64_t n_out, int64_t n_in) {
  Weights w{internal::MakePackedShape(c.t, n_out, n_in, c.group), {}, {}};
  const size_t rb = w.sh.SrcRowBytes();
  w.rows.resize(rb * static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    auto x = testing::RandomFloats(rng, n_in, 0.05f);
    if (o % 5 == 0) x[static_cast<size_t>(o % n_in)] = 0.4f;  // an outlier stretches one group's range
    uint8_t* dst = w.rows.data() + static_cast<size_t>(o) * rb;
    if (IsFerryInt4(c.t)) {
      ref::QuantizeRowInt4(x.data(), dst, n_in, c.group);
    } else {
      ref::QuantizeRow(c.t, x.data(), dst, n_in);
    }
  }
  if (c.t == DType::kMXFP4) {  // any bytes: every e2m1 code, exponents from the denormal e = 0, 1 up
    std::uniform_int_distribution<int> byte(0, 255), expo(118, 135);  // scales 2^-10 .. 2^7
    auto* blocks = reinterpret_cast<block_mxfp4*>(w.rows.data());
    for (size_t i = 0; i < w.rows.size() / sizeof(block_mxfp4); ++i) {
      blocks[i].e = static_cast<uint8_t>(i % 7 == 0 ? i % 2 : expo(rng));  // every 7th: e = 0 or 1
      for (uint8_t& q : blocks[i].qs) q = static_cast<uint8_t>(byte(rng));
    }
  }
  if (c.t == DType::kQ8_0) {  // -128 never comes from ggml's quantizer but may be in a file
    reinterpret_cast<block_q8_0*>(w.rows.data())[1].qs[3] = -128;
    reinterpret_cast<block_q8_0*>(w.rows.data())[2].qs[31] = -128;
  }
  w.packed.assign(w.sh.TotalBytes(), 0xAB);
  internal::PackWeightsGroup(c.t, w.rows.data(), n_out, n_in, c.group, w.packed.data(), nullptr);
  return w;
}

std::vector<float> RunPacked(const Weights& w, const Case& c, const std::vector<float>& x, int64_t tok0,
                             int64_t n_tok, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(n_tok * w.sh.n_out), -1.f);
  internal::MatMulPackedGroup(w.packed.data(), c.t, w.sh.n_out, w.sh.n_in, c.group,
                              x.data() + tok0 * w.sh.n_in, n_tok, y.data(), pool);
  return y;
}

TEST(Int4, QuantizeDequantizeWithinHalfStep) {
  std::mt19937 rng(50);
  for (DType t : {DType::kI4G32, DType::kI4G64, DType::kI4G128}) {
    const int64_t group = FerryInt4Group(t);
    auto x = testing::RandomFloats(rng, 512, 1.f);
    std::vector<uint8_t> q(static_cast<size_t>(512 / group) * internal::Int4GroupBytes(group));
    ref::QuantizeRowInt4(x.data(), q.data(), 512, group);
    auto y = DequantRow({t, group}, q.data(), 512);
    for (int64_t g = 0; g < 512 / group; ++g) {
      uint16_t dh;
      std::memcpy(&dh, q.data() + g * internal::Int4GroupBytes(group), 2);
      const float d = Fp16ToFp32(dh);
      EXPECT_EQ(q[g * internal::Int4GroupBytes(group) + 3], 0);
      for (int64_t i = g * group; i < (g + 1) * group; ++i)
        ASSERT_LE(std::fabs(x[i] - y[i]), 0.5f * d * 1.01f + 1e-6f) << i;
    }
  }
  // An all-zero group: d = 0, dequantizes to zeros.
  std::vector<float> z(128, 0.f), back(128, 1.f);
  std::vector<uint8_t> q(68);
  ref::QuantizeRowInt4(z.data(), q.data(), 128, 128);
  ref::DequantizeRowInt4(q.data(), back.data(), 128, 128);
  for (float v : back) EXPECT_EQ(v, 0.f);
  // Through the public DType entry points.
  EXPECT_TRUE(CanQuantize(DType::kI4G128));
  EXPECT_TRUE(CanDequantize(DType::kI4G128));
  EXPECT_EQ(RowBytes(DType::kI4G128, 256), 136u);
}

TEST(Packed, PackUnpackRoundTripIsBitExact) {
  std::mt19937 rng(51);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.Name());
    for (int64_t n_out : {8, 37, 64}) {
      Weights w = MakeWeights(rng, c, n_out, 256);
      std::vector<uint8_t> back(w.rows.size(), 0xCD);
      internal::UnpackWeightsGroup(c.t, w.packed.data(), n_out, 256, c.group, back.data());
      ASSERT_EQ(0, std::memcmp(back.data(), w.rows.data(), back.size())) << n_out;
      // Threaded packing writes the same bytes (padding rows zeroed).
      ThreadPool pool(2);
      std::vector<uint8_t> p2(w.packed.size(), 0x11);
      internal::PackWeightsGroup(c.t, w.rows.data(), n_out, 256, c.group, p2.data(), &pool);
      ASSERT_EQ(0, std::memcmp(p2.data(), w.packed.data(), p2.size()));
    }
  }
  EXPECT_EQ(PackedBytes(DType::kQ4_0, 16, 64), 2u * 2 * 144);
  EXPECT_EQ(PackedBytes(DType::kQ8_0, 9, 64), 2u * 2 * 272);
  // mxfp4 units hold 4 blocks: 2 blocks leave half the 32-byte header unused.
  EXPECT_EQ(PackedBytes(DType::kMXFP4, 9, 64), 2u * (32 + 2 * 128));
  EXPECT_EQ(PackedBytes(DType::kMXFP4, 9, 128), 2u * 4 * 8 * 17);  // whole units: no overhead
  EXPECT_TRUE(CanPack(DType::kMXFP4, 2880));
  EXPECT_FALSE(CanPack(DType::kMXFP4, 48));
  EXPECT_EQ(PackedBytes(DType::kI4G128, 8, 256), 8u * 128 + 96);        // one unit of 4 groups' header
  EXPECT_EQ(PackedBytes(DType::kI4G128, 8, 1024), 32u * 128 + 2 * 96);  // stored: 8 x 8 x 68 B
  EXPECT_EQ(PackedBytes(DType::kQ4_K, 9, 512), 2u * 2 * 1184);
  EXPECT_TRUE(CanPack(DType::kQ4_K, 256));
  EXPECT_FALSE(CanPack(DType::kQ4_K, 288));
  EXPECT_EQ(PackedBytes(DType::kQ6_K, 9, 512), 2u * 2 * 1680);  // 8 rows x 210: no overhead
  EXPECT_TRUE(CanPack(DType::kQ6_K, 512));
  EXPECT_FALSE(CanPack(DType::kQ6_K, 288));
  EXPECT_TRUE(CanPack(DType::kQ4_0, 64));
  EXPECT_TRUE(CanPack(DType::kI4G128, 64));  // ragged last group (core/dtype.h)
  EXPECT_FALSE(CanPack(DType::kF16, 64));
}

// A row group is one stream: each unit's scales sit right before its groups' quants (decode
// reads the group front to back), and every unit is a whole number of 32-byte words so that no
// weight load crosses a cache line (packed_layout.h). Literal offsets, not PackedShape's helpers,
// so a change of layout must show here: row r of group 1, a block in a unit's second group.
TEST(Packed, ARowGroupIsOneStreamOfAlignedUnits) {
  std::mt19937 rng(57);
  constexpr int64_t kIn = 256, kRow = 11, kG = 1, kR = kRow - 8 * kG;  // nb = 8
  for (const Case& c : kCases) {
    if (IsKQuant(c.t) || c.t == DType::kI4G32 || c.t == DType::kI4G128) continue;
    SCOPED_TRACE(c.Name());
    const Weights w = MakeWeights(rng, c, 16, kIn);
    const uint8_t* row = w.rows.data() + kRow * w.sh.SrcRowBytes();
    const uint8_t* grp = w.packed.data() + kG * w.sh.RowGroupBytes();
    const uint8_t* d = nullptr;   // the block's scale bytes in the stored row
    const uint8_t* qs = nullptr;  // the block's first 16 quant bytes (q8_0: 32) in the stored row
    size_t group_bytes = 0, at_d = 0, at_qs = 0, d_bytes = 2;
    if (c.t == DType::kQ4_0) {  // units of 288 B = d [2][8] | 2 x 128; block 3 = unit 1, slot 1
      const auto& b = reinterpret_cast<const block_q4_0*>(row)[3];
      d = reinterpret_cast<const uint8_t*>(&b.d), qs = b.qs;
      group_bytes = 4 * 288, at_d = 288 + 16 + 2 * kR, at_qs = 288 + 32 + 128;
    } else if (c.t == DType::kQ8_0) {  // units of 544 B = d [2][8] | 2 x 256
      const auto& b = reinterpret_cast<const block_q8_0*>(row)[3];
      d = reinterpret_cast<const uint8_t*>(&b.d), qs = reinterpret_cast<const uint8_t*>(b.qs);
      group_bytes = 4 * 544, at_d = 544 + 16 + 2 * kR, at_qs = 544 + 32 + 256;
    } else if (c.t == DType::kMXFP4) {  // units of 544 B = e [4][8] | 4 x 128; block 5 = unit 1, slot 1
      const auto& b = reinterpret_cast<const block_mxfp4*>(row)[5];
      d = &b.e, qs = b.qs, d_bytes = 1;
      group_bytes = 2 * 544, at_d = 544 + 8 + kR, at_qs = 544 + 32 + 128;
    } else {  // int4_g64: one unit d [4][8] | z [4][8] | 8 x 128 B; stored fp16 d | u8 z | 0 | 32
              // quant bytes per group. Block 3 = group 1's second block (stored bytes 36 + 20..35).
      d = row + 36, qs = row + 36 + 4 + 16;
      group_bytes = 96 + 8 * 128, at_d = 16 + 2 * kR, at_qs = 96 + 3 * 128;
      EXPECT_EQ(grp[64 + 8 + kR], row[36 + 2]) << "z of row " << kRow << " after the unit's d";
    }
    EXPECT_EQ(w.sh.RowGroupBytes(), group_bytes);
    EXPECT_EQ(0, std::memcmp(grp + at_d, d, d_bytes)) << "the block's scale in its unit's header";
    const int loads = c.t == DType::kQ8_0 ? 8 : 4;
    for (int j = 0; j < loads; ++j)
      EXPECT_EQ(0, std::memcmp(grp + at_qs + 32 * j + 4 * kR, qs + 4 * j, 4)) << "load " << j;
    EXPECT_EQ(group_bytes % 32, 0u);
    EXPECT_EQ(at_qs % 32, 0u);
  }
}

// Every weight load of every unit type starts on a 32-byte word, whatever n_in (odd block
// counts, ragged int4 groups, partial last units); q4_K's super-blocks too (q6_K's 1680-byte
// super-blocks alternate between 0 and 16 mod 32).
TEST(Packed, EveryWeightLoadIsAligned) {
  for (const DType t :
       {DType::kQ4_0, DType::kQ8_0, DType::kMXFP4, DType::kI4G32, DType::kI4G64, DType::kI4G128}) {
    for (const int64_t n_in : {32, 96, 160, 224, 416, 2048, 5632, 100}) {
      if (!CanPack(t, n_in)) continue;
      SCOPED_TRACE(std::string(DTypeName(t)) + " n_in=" + std::to_string(n_in));
      const internal::PackedShape sh = internal::MakePackedShape(t, 9, n_in, internal::kInt4Group);
      EXPECT_EQ(sh.RowGroupBytes() % 32, 0u);
      EXPECT_EQ(sh.UnitBytes() % 32, 0u);
      for (int64_t b = 0; b < sh.nb(); ++b) ASSERT_EQ(sh.QsAt(b) % 32, 0u) << "block " << b;
      // The stream is dense: the last block's quants end the row group.
      EXPECT_EQ(sh.QsAt(sh.nb() - 1) + sh.BlockQsBytes(), sh.RowGroupBytes());
    }
  }
  EXPECT_EQ(internal::MakePackedShape(DType::kQ4_K, 8, 512, 128).RowGroupBytes() % 32, 0u);
}

TEST(Packed, MatMulMatchesNaiveReference) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(52);
  ThreadPool pool(2);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + c.Name());
      const int64_t n_out = 37, n_in = 512, n_tok = 6;
      Weights w = MakeWeights(rng, c, n_out, n_in);
      auto x = testing::RandomFloats(rng, n_in * n_tok);
      auto y = RunPacked(w, c, x, 0, n_tok, &pool);
      for (int64_t tk = 0; tk < n_tok; ++tk) {
        const DType act = IsKQuant(c.t) ? DType::kQ8_K : DType::kQ8_0;  // llama.cpp's vec_dot_type
        auto xq = testing::ToPartner(IsKQuant(c.t) ? c.t : DType::kQ8_0, x.data() + tk * n_in, n_in);
        auto xf = testing::Dequant(act, xq.data(), n_in);
        for (int64_t o = 0; o < n_out; ++o) {
          auto wf = DequantRow(c, w.rows.data() + o * w.sh.SrcRowBytes(), n_in);
          double want = 0;
          for (int64_t i = 0; i < n_in; ++i) want += static_cast<double>(wf[i]) * xf[i];
          ASSERT_NEAR(y[tk * n_out + o], want, 1e-5 * testing::AbsDot(wf, xf) + 1e-6)
              << "t=" << tk << " o=" << o;
        }
      }
    }
  }
}

// Every table against the scalar twin: one group (the 512-bit kernels' single-group path), an
// odd count of groups (a pair and a single), a zero-padded last group, ragged int4 rows, every
// token count of a tile, one and two threads.
TEST(Packed, EveryTableIsBitIdenticalToScalarTwin) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(53);
  ThreadPool pool(2);
  struct Shape {
    int64_t n_out, n_in;
  };
  for (const Case& c : kCases) {
    for (const Shape s : {Shape{8, 1024}, Shape{24, 256}, Shape{45, 1024}, Shape{19, 200}}) {
      if (s.n_in % 32 != 0 && !IsFerryInt4(c.t)) continue;  // only int4 rows may be ragged
      SCOPED_TRACE(c.Name() + " " + std::to_string(s.n_out) + "x" + std::to_string(s.n_in));
      Weights w = MakeWeights(rng, c, s.n_out, s.n_in);
      auto x = testing::RandomFloats(rng, s.n_in * 7);
      ASSERT_TRUE(isa_guard.Set(Isa::kScalar));
      auto want = RunPacked(w, c, x, 0, 7, nullptr);
      for (Isa isa : testing::TestIsas()) {
        SCOPED_TRACE(IsaName(isa));
        ASSERT_TRUE(isa_guard.Set(isa));
        for (int64_t n_tok = 1; n_tok <= 7; ++n_tok) {
          auto got = RunPacked(w, c, x, 0, n_tok, n_tok % 2 ? nullptr : &pool);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << n_tok << " tokens";
        }
      }
    }
  }
}

TEST(Packed, BatchInvariantBitExact) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(54);
  ThreadPool pool2(2), pool1(1);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + c.Name());
      const int64_t n_in = 512, n_tok = 9;
      Weights w = MakeWeights(rng, c, 300, n_in);  // several chunks and a padded last group
      auto x = testing::RandomFloats(rng, n_in * n_tok);
      const auto all = RunPacked(w, c, x, 0, n_tok, &pool2);
      ASSERT_EQ(0, std::memcmp(all.data(), RunPacked(w, c, x, 0, n_tok, nullptr).data(), all.size() * 4));
      ASSERT_EQ(0, std::memcmp(all.data(), RunPacked(w, c, x, 0, n_tok, &pool1).data(), all.size() * 4));
      for (int64_t tk = 0; tk < n_tok; ++tk) {
        const auto alone = RunPacked(w, c, x, tk, 1, &pool2);
        ASSERT_EQ(0, std::memcmp(alone.data(), all.data() + tk * 300, 300 * 4)) << "token " << tk;
      }
      const auto sub = RunPacked(w, c, x, 3, 5, nullptr);
      ASSERT_EQ(0, std::memcmp(sub.data(), all.data() + 3 * 300, sub.size() * 4));
    }
  }
}

TEST(Packed, AgreesWithUnpackedMatMul) {
  std::mt19937 rng(55);
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kMXFP4, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(t));
    Weights w = MakeWeights(rng, {t, 32}, 64, 2048);
    auto x = testing::RandomFloats(rng, 2048 * 3);
    std::vector<float> yp(64 * 3), yu(64 * 3);
    MatMulPacked(w.packed.data(), t, 64, 2048, x.data(), 3, yp.data(), &pool);
    MatMul(w.rows.data(), t, 64, 2048, x.data(), 3, yu.data(), &pool);
    for (size_t i = 0; i < yp.size(); ++i) ASSERT_NEAR(yp[i], yu[i], 1e-4f * (1.f + std::fabs(yu[i]))) << i;
  }
}

// A layout choice must not change results (issue 19): MatMul on the stored rows and
// MatMulPacked on their repacked copy give the same bits for every type both paths run, on
// every table, whatever the token count (the in-place dots sum in the packed order).
TEST(Packed, InPlaceMatMulEqualsPackedBits) {
  testing::ScopedIsa isa_guard;
  std::mt19937 rng(56);
  ThreadPool pool(2);
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(isa_guard.Set(isa));
    for (const Case& c : kCases) {
      if (!CanMatMul(c.t) || c.group != 32) continue;  // int4 runs only packed
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + c.Name());
      for (const int64_t n_in : {32, 288, 2048}) {
        if (n_in % 256 != 0 && IsKQuant(c.t)) continue;  // whole super-blocks
        const int64_t n_out = 21, n_tok = 5;
        Weights w = MakeWeights(rng, c, n_out, n_in);
        auto x = testing::RandomFloats(rng, n_in * n_tok);
        std::vector<float> yp(n_out * n_tok), yu(n_out * n_tok, -1.f);
        MatMulPacked(w.packed.data(), c.t, n_out, n_in, x.data(), n_tok, yp.data(), &pool);
        MatMul(w.rows.data(), c.t, n_out, n_in, x.data(), n_tok, yu.data(), &pool);
        for (size_t i = 0; i < yp.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(yp[i]), std::bit_cast<uint32_t>(yu[i]))
              << "n_in " << n_in << " token " << i / n_out << " row " << i % n_out << ": packed " << yp[i]
              << " in place " << yu[i];
      }
    }
  }
}

// The bandwidth probe's loop must read every float it claims to (its speed is in
// kernels_bench's ReadBandwidth, not here): small integers sum exactly in f32, so each table's
// read_sum equals the exact total, tail included.
TEST(Bandwidth, ProbeReadsEveryFloatOnEveryIsa) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> d(-8, 8);
  testing::ScopedIsa guard;
  for (Isa isa : testing::TestIsas()) {
    ASSERT_TRUE(guard.Set(isa));
    SCOPED_TRACE(IsaName(isa));
    for (int64_t n : {0, 1, 31, 32, 33, 1000, 4096 + 7}) {
      AlignedBuffer buf(static_cast<size_t>(n + 16) * 4);
      float* x = buf.as<float>();
      int64_t exact = 0;
      for (int64_t i = 0; i < n; ++i) {
        x[i] = static_cast<float>(d(rng));
        exact += static_cast<int64_t>(x[i]);
      }
      EXPECT_EQ(internal::Table().read_sum(x, n), static_cast<double>(exact)) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace ferry::kernels
