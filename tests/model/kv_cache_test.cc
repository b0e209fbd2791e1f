// The KV caches' INT8 key copy (progressive attention): absent until enabled, then addressed
// like the f32 keys, exposed through View(), and carried by every copy the paged cache makes
// of its keys (copy-on-write of a block, compaction of a row).
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "kernels/kernels.h"
#include "kernels/kv_row.h"
#include "kernels/ref/ref.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"
#include "synthetic/synthetic_model.h"

namespace ferry {
namespace {

constexpr int32_t kLayers = 2, kBlocks = 4, kBlockSize = 4, kKvHeads = 2, kHeadDim = 8;

// Fills slot `slot` of batch slot `seq` in `layer` with a pattern unique to `tag`.
void WriteInt8Row(KvCache& kv, int32_t layer, int32_t seq, int32_t slot, int tag) {
  int8_t* k = kv.KeySlotInt8(layer, seq, slot);
  float* s = kv.KeyScaleSlot(layer, seq, slot);
  for (int i = 0; i < kKvHeads * kHeadDim; ++i) k[i] = static_cast<int8_t>(tag * 7 + i);
  for (int h = 0; h < kKvHeads; ++h) s[h] = 0.5f * tag + h;
}
std::vector<int8_t> Int8Row(KvCache& kv, int32_t layer, int32_t seq, int32_t slot) {
  const int8_t* k = kv.KeySlotInt8(layer, seq, slot);
  return {k, k + kKvHeads * kHeadDim};
}
std::vector<float> Scales(KvCache& kv, int32_t layer, int32_t seq, int32_t slot) {
  const float* s = kv.KeyScaleSlot(layer, seq, slot);
  return {s, s + kKvHeads};
}

TEST(KvCacheInt8Keys, ContiguousCacheExposesTheCopyOnlyOnceEnabled) {
  auto kv = ContiguousKvCache::Create(kLayers, 2, 16, kKvHeads, kHeadDim);
  ASSERT_TRUE(kv.ok());
  const size_t plain = kv->Bytes();
  EXPECT_EQ(kv->KeySlotInt8(0, 0, 0), nullptr);
  EXPECT_EQ(kv->View(1, 1).k_i8, nullptr);
  ASSERT_TRUE(kv->EnableInt8Keys().ok());
  const size_t key_elems = size_t{kLayers} * 2 * 16 * kKvHeads * kHeadDim;
  EXPECT_EQ(kv->Bytes() - plain, key_elems + key_elems / kHeadDim * 4);  // int8 keys + f32 scales
  WriteInt8Row(*kv, 1, 1, 5, 3);
  // View(layer, seq) addresses slot p of seq through block_table[0] = seq, like the f32 keys.
  const kernels::KvBlocks v = kv->View(1, 1);
  const size_t block = static_cast<size_t>(v.block_table[0]);
  const size_t row = (block * 16 + 5) * kKvHeads;
  EXPECT_EQ(v.k_i8 + row * kHeadDim, kv->KeySlotInt8(1, 1, 5));
  EXPECT_EQ(v.k_i8_scale + row, kv->KeyScaleSlot(1, 1, 5));
  EXPECT_EQ(static_cast<const uint8_t*>(v.k_cache) + row * kv->KeySlotBytes() / kKvHeads,
            kv->KeyBytes(1, 1, 5));
}

TEST(KvCacheInt8Keys, PagedCacheCarriesTheCopyThroughCopyOnWriteAndCompaction) {
  auto kv = PagedKvCache::Create(kLayers, kBlocks, kBlockSize, kKvHeads, kHeadDim, 2, 16);
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(kv->EnableInt8Keys().ok());
  const std::vector<int32_t> shared = {2, 0}, copy = {2, 3};
  kv->SetBlockTable(0, shared);
  kv->SetBlockTable(1, copy);
  // Slots 4..6 (a partly filled block 0) written through seq 0, then block 0 copied to 3.
  for (int32_t l = 0; l < kLayers; ++l)
    for (int32_t p = 4; p < 7; ++p) WriteInt8Row(*kv, l, 0, p, 10 * l + p);
  kv->CopyBlock(0, 3);
  for (int32_t l = 0; l < kLayers; ++l)
    for (int32_t p = 4; p < 7; ++p) {
      EXPECT_EQ(Int8Row(*kv, l, 1, p), Int8Row(*kv, l, 0, p)) << l << " " << p;
      EXPECT_EQ(Scales(*kv, l, 1, p), Scales(*kv, l, 0, p)) << l << " " << p;
    }
  // The copy is independent: writing seq 1's row leaves seq 0's alone.
  WriteInt8Row(*kv, 0, 1, 6, 99);
  EXPECT_NE(Int8Row(*kv, 0, 1, 6), Int8Row(*kv, 0, 0, 6));
  // Compaction moves slot 6 to slot 1 (across blocks) in every layer.
  const std::vector<int8_t> moved = Int8Row(*kv, 1, 0, 6);
  const std::vector<float> moved_scales = Scales(*kv, 1, 0, 6);
  kv->MoveRow(0, 6, 1);
  EXPECT_EQ(Int8Row(*kv, 1, 0, 1), moved);
  EXPECT_EQ(Scales(*kv, 1, 0, 1), moved_scales);
  // View() attaches the copy with the f32 keys' block layout.
  const kernels::KvBlocks v = kv->View(1, 1);
  const size_t row = (static_cast<size_t>(v.block_table[1]) * kBlockSize + 2) * kKvHeads;
  EXPECT_EQ(v.k_i8 + row * kHeadDim, kv->KeySlotInt8(1, 1, 6));
  EXPECT_EQ(v.k_i8_scale + row, kv->KeyScaleSlot(1, 1, 6));
}

// ---- KV storage types (model/kv_storage.h) ----

std::vector<float> Row(int n, int seed) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    r[static_cast<size_t>(i)] = std::sin(0.37f * (i + 1) * (seed + 1)) * (1 + seed % 3);
  return r;
}

TEST(KvCacheTypes, StoresEachTypesRoundingAndCountsItsBytes) {
  constexpr int32_t kHd = 64;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    auto kv = ContiguousKvCache::Create(kLayers, 1, 8, kKvHeads, kHd, KvCacheTypes{t, t});
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    EXPECT_EQ(kv->KeySlotBytes(), kKvHeads * RowBytes(t, kHd));
    EXPECT_EQ(kv->Bytes(), 2 * size_t{kLayers} * 8 * kKvHeads * RowBytes(t, kHd));
    const std::vector<float> k = Row(kKvHeads * kHd, 1), v = Row(kKvHeads * kHd, 2);
    kv->StoreKey(1, 0, 3, k.data());
    kv->StoreValue(1, 0, 3, v.data());
    std::vector<float> got(k.size()), want(k.size());
    std::vector<uint8_t> q(RowBytes(t, kHd));
    kv->LoadKey(1, 0, 3, got.data());
    for (int h = 0; h < kKvHeads; ++h) {  // per head, as one row of the type
      kernels::QuantizeRow(t, k.data() + h * kHd, q.data(), kHd);
      kernels::DequantizeRow(t, q.data(), want.data() + h * kHd, kHd);
    }
    EXPECT_EQ(got, want);
    // Each type's rounding, from its definition (docs/formats.md 6b): f16 / bf16 half an ulp of
    // 11 / 8 bits; q8_0 half a step of amax/127; q4_0 one step of amax/8 (d = max/-8 puts the
    // far end at 7 steps: values there clip by up to a step). 1% for the f16 scale's rounding.
    kv->LoadValue(1, 0, 3, got.data());
    for (size_t i = 0; i < v.size(); ++i) {
      float amax = 0;
      for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(v[j]));
      const float tol = t == DType::kF32    ? 0.f
                        : t == DType::kF16  ? std::fabs(v[i]) / 2048
                        : t == DType::kBF16 ? std::fabs(v[i]) / 256
                        : t == DType::kQ8_0 ? amax / 254 * 1.01f
                                            : amax / 8 * 1.01f;
      EXPECT_LE(std::fabs(got[i] - v[i]), tol) << i;
    }
  }
}

// K and V are separate buffers aligned alike (huge ones to 2 MiB); V's slots start
// kernels::KvValueLead bytes in, so a key's K and V rows never sit at the same offset within
// their slots (docs/benchmarks.md: that coincidence slowed tinyllama's f16 decode attention
// 1.6x at 2 threads). Checked on buffers past 2 MiB, where the alignment is AlignedBuffer's.
TEST(KvCacheTypes, ValueRowsNeverShareTheirKeyRowsOffsetInTheSlot) {
  struct Shape {
    int32_t kv_heads, head_dim;
  };
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0})
    for (const Shape& sh : {Shape{4, 64}, Shape{8, 64}, Shape{8, 128}, Shape{2, 256}, Shape{1, 128}}) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " kv_heads " + std::to_string(sh.kv_heads) + " head_dim " +
                   std::to_string(sh.head_dim));
      KvStorage s;
      const size_t slot = sh.kv_heads * RowBytes(t, sh.head_dim);
      const size_t n_slots = ((size_t{4} << 20) + slot - 1) / slot;  // both buffers past 2 MiB
      ASSERT_TRUE(s.Allocate(n_slots, sh.kv_heads, sh.head_dim, KvCacheTypes{t, t}, "test", "--none").ok());
      ASSERT_EQ(s.key_slot_bytes(), slot);
      const auto k = reinterpret_cast<uintptr_t>(s.KeyBytes(0)),
                 v = reinterpret_cast<uintptr_t>(s.ValueBytes(0));
      EXPECT_EQ(k % 64, 0u);
      EXPECT_EQ(v % 64, 0u);  // rows keep their cache-line alignment
      const size_t lead = (v - k) % (size_t{2} << 20);
      EXPECT_EQ(lead, kernels::KvValueLead(slot));
      EXPECT_NE(lead % slot, 0u) << "V rows at their K rows' offset within the slot";
      EXPECT_EQ(s.Bytes(), 2 * n_slots * slot);  // the lead is not counted as cache
      // The last slot's V bytes stay inside the buffer: its last head row round-trips as the type
      // rounds it.
      const std::vector<float> x = Row(sh.head_dim, 3);
      std::vector<float> back(x.size() * sh.kv_heads), want(x.size());
      std::vector<uint8_t> q(RowBytes(t, sh.head_dim));
      kernels::QuantizeRow(t, x.data(), q.data(), sh.head_dim);
      kernels::DequantizeRow(t, q.data(), want.data(), sh.head_dim);
      s.StoreValue(n_slots - 1, sh.kv_heads - 1, x.data());
      s.LoadValue(n_slots - 1, back.data());
      EXPECT_TRUE(std::equal(want.begin(), want.end(), back.end() - sh.head_dim));
    }
}

TEST(KvCacheTypes, BadTypesAreClearErrors) {
  auto bad = ParseKvCacheType("q5_1", "--cache-type-k");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--cache-type-k 'q5_1'"), std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("f32, f16, bf16, q8_0, q4_0"), std::string::npos);
  ASSERT_TRUE(ParseKvCacheType("Q8_0", "--cache-type-v").ok());
  // head_dim 8 (stories260K) cannot hold a block of 32: named, with the types that fit.
  auto kv = ContiguousKvCache::Create(kLayers, 1, 8, kKvHeads, 8, KvCacheTypes{DType::kF16, DType::kQ4_0});
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("--cache-type-v q4_0"), std::string::npos) << kv.status().ToString();
  EXPECT_NE(kv.status().message().find("head_dim is 8"), std::string::npos);
  EXPECT_TRUE(
      ContiguousKvCache::Create(kLayers, 1, 8, kKvHeads, 8, KvCacheTypes{DType::kBF16, DType::kF16}).ok());
}

// Copy-on-write and compaction copy quantized rows byte for byte (scales with their quants).
TEST(KvCacheTypes, PagedCopiesCarryQuantizedBytes) {
  constexpr int32_t kHd = 64;
  auto kv = PagedKvCache::Create(kLayers, kBlocks, kBlockSize, kKvHeads, kHd, 2, 16,
                                 KvCacheTypes{DType::kQ8_0, DType::kQ4_0});
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> a = {1, 0}, b = {3, 2};
  kv->SetBlockTable(0, a);
  kv->SetBlockTable(1, b);
  for (int32_t l = 0; l < kLayers; ++l)
    for (int32_t p = 0; p < 8; ++p) {
      kv->StoreKey(l, 0, p, Row(kKvHeads * kHd, 10 * l + p).data());
      kv->StoreValue(l, 0, p, Row(kKvHeads * kHd, 10 * l + p + 100).data());
    }
  kv->CopyBlock(0, 2);   // seq 0's positions 4..7 -> seq 1's positions 4..7
  kv->MoveRow(1, 5, 1);  // then seq 1's row 5 -> row 1 (block 3, never written before)
  for (int32_t l = 0; l < kLayers; ++l) {
    for (int32_t p = 4; p < 8; ++p) {
      EXPECT_EQ(0, std::memcmp(kv->KeyBytes(l, 1, p), kv->KeyBytes(l, 0, p), kv->KeySlotBytes())) << p;
      EXPECT_EQ(0, std::memcmp(kv->ValueBytes(l, 1, p), kv->ValueBytes(l, 0, p), kv->ValueSlotBytes())) << p;
    }
    EXPECT_EQ(0, std::memcmp(kv->KeyBytes(l, 1, 1), kv->KeyBytes(l, 0, 5), kv->KeySlotBytes()));
    EXPECT_EQ(0, std::memcmp(kv->ValueBytes(l, 1, 1), kv->ValueBytes(l, 0, 5), kv->ValueSlotBytes()));
  }
}

// tiny-hd64 (head_dim 64, so every KV type fits) written with weights of `type` and standard
// deviation 0.08 to TempDir()/name, and loaded; model is null (and the test failed) on an error.
struct TinyHd64 {
  std::unique_ptr<formats::WeightSource> src;  // the model reads its weights from here
  std::unique_ptr<Model> model;
};
TinyHd64 LoadTinyHd64(const std::string& name, DType type) {
  const std::string path = ::testing::TempDir() + "/" + name;
  SyntheticModelOptions o;
  o.preset = "tiny-hd64";
  o.type = type;
  o.stddev = 0.08f;
  TinyHd64 t;
  if (Status st = WriteSyntheticModel(path, o); !st.ok()) {
    ADD_FAILURE() << st.ToString();
    return t;
  }
  auto src = formats::OpenWeightSource(path);
  if (!src.ok()) {
    ADD_FAILURE() << src.status().ToString();
    return t;
  }
  t.src = std::move(*src);
  auto m = CreateModel(*t.src);
  if (!m.ok()) {
    ADD_FAILURE() << m.status().ToString();
    return t;
  }
  t.model = std::move(*m);
  return t;
}

// A model run through a paged cache with shuffled blocks stores the same bytes and produces
// the same logits as through the contiguous cache, for every type.
TEST(KvCacheTypes, PagedEqualsContiguousBitForBit) {
  TinyHd64 t64 = LoadTinyHd64("kv-types-tiny-hd64.gguf", DType::kQ8_0);
  ASSERT_TRUE(t64.model);
  const Model* m = t64.model.get();
  const ModelConfig& c = m->config();
  const int n = 45, bs = 8;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    const KvCacheTypes types{t, t == DType::kQ8_0 ? DType::kQ4_0 : t};
    auto cont = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim, types);
    auto paged = PagedKvCache::Create(c.n_layers, 9, bs, c.n_kv_heads, c.head_dim, 1, 64, types);
    ASSERT_TRUE(cont.ok() && paged.ok());
    const std::vector<int32_t> table = {7, 2, 5, 0, 8, 1};  // 6 blocks of 8 >= 45 tokens, shuffled
    paged->SetBlockTable(0, table);
    std::vector<float> lc(static_cast<size_t>(n) * c.n_vocab), lp(lc.size());
    for (int s = 0; s < n; s += 10) {  // prefill chunks of 10, then decode-sized calls
      ForwardBatch b;
      for (int i = s; i < std::min(n, s + 10); ++i) b.Add(3 + (i * 37) % 500, i, 0, true);
      ASSERT_TRUE(m->Forward(b, *cont, lc.data() + static_cast<size_t>(s) * c.n_vocab, nullptr).ok());
      ASSERT_TRUE(m->Forward(b, *paged, lp.data() + static_cast<size_t>(s) * c.n_vocab, nullptr).ok());
    }
    EXPECT_EQ(lc, lp);
    for (int32_t l = 0; l < c.n_layers; ++l)
      for (int32_t p = 0; p < n; ++p) {
        ASSERT_EQ(0, std::memcmp(cont->KeyBytes(l, 0, p), paged->KeyBytes(l, 0, p), cont->KeySlotBytes()));
        ASSERT_EQ(0,
                  std::memcmp(cont->ValueBytes(l, 0, p), paged->ValueBytes(l, 0, p), cont->ValueSlotBytes()));
      }
  }
}

// View() hands the kernels the stored bytes with their types: attention over the view equals
// attention over the dequantized rows (LoadKey / LoadValue) in an f32 block table (for a q8_0
// or q4_0 K cache with the query rounded to q8_0, as the kernels read it against such keys),
// within float rounding and the integer P.V's int16 rounding of a q8_0 / q4_0 V cache.
TEST(KvCacheTypes, ViewCarriesTheStoredTypes) {
  constexpr int32_t kHd = 64, kPos = 6;
  for (const KvCacheTypes types :
       {KvCacheTypes{DType::kQ8_0, DType::kQ4_0}, KvCacheTypes{DType::kBF16, DType::kF16}}) {
    SCOPED_TRACE(std::string(DTypeName(types.k)) + "/" + DTypeName(types.v));
    auto kv = ContiguousKvCache::Create(kLayers, 1, 8, kKvHeads, kHd, types);
    ASSERT_TRUE(kv.ok());
    std::vector<float> k32(static_cast<size_t>(kPos) * kKvHeads * kHd), v32(k32.size());
    for (int32_t p = 0; p < kPos; ++p) {
      kv->StoreKey(1, 0, p, Row(kKvHeads * kHd, p).data());
      kv->StoreValue(1, 0, p, Row(kKvHeads * kHd, p + 50).data());
      kv->LoadKey(1, 0, p, k32.data() + static_cast<size_t>(p) * kKvHeads * kHd);
      kv->LoadValue(1, 0, p, v32.data() + static_cast<size_t>(p) * kKvHeads * kHd);
    }
    const kernels::KvBlocks view = kv->View(1, 0);
    EXPECT_EQ(view.k_type, types.k);
    EXPECT_EQ(view.v_type, types.v);
    const int32_t table = 0;
    const kernels::KvBlocks f32{k32.data(), v32.data(), &table, kPos};
    const std::vector<float> q = Row(2 * kKvHeads * kHd, 7);  // 2 query heads per KV head
    const int32_t pos = kPos - 1;
    std::vector<float> got(q.size()), want(q.size()), q_read;  // q_read: each head as the scores read it
    for (size_t h = 0; h < q.size() / kHd; ++h) {
      const std::vector<float> head = kernels::ref::QueryAsRead(types.k, q.data() + h * kHd, kHd);
      q_read.insert(q_read.end(), head.begin(), head.end());
    }
    kernels::Attention(q.data(), 1, &pos, 2 * kKvHeads, kKvHeads, kHd, 0.125f, view, got.data(), nullptr);
    kernels::Attention(q_read.data(), 1, &pos, 2 * kKvHeads, kKvHeads, kHd, 0.125f, f32, want.data(),
                       nullptr);
    // A q8_0 / q4_0 V cache's P.V rounds its weights to int16 (ref.h AttentionNaive's bound).
    std::vector<float> naive(q.size()), pv_int(q.size());
    kernels::ref::AttentionNaive(q.data(), 1, &pos, 2 * kKvHeads, kKvHeads, kHd, 0.125f, view, naive.data(),
                                 pv_int.data());
    for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f + pv_int[i]) << i;
  }
}

// --cache-rotate: the model multiplies each head's q and k by the orthonormal Hadamard matrix
// before K is stored, so an f32 cache holds H k and the scores q.k, hence the logits, are those
// of the plain cache up to f32 rounding.
TEST(KvCacheRotate, LogitsUnchangedAndKeysStoredRotated) {
  // f32 weights: no activation rounding that a last-bit difference could flip.
  TinyHd64 t64 = LoadTinyHd64("kv-rotate-tiny-hd64.gguf", DType::kF32);
  ASSERT_TRUE(t64.model);
  const Model* m = t64.model.get();
  const ModelConfig& c = m->config();
  const int n = 40;
  KvCacheTypes rotated = KvCacheTypes::F32();
  rotated.rotate_k = true;
  auto plain_kv = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim, KvCacheTypes::F32());
  auto rot_kv = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim, rotated);
  ASSERT_TRUE(plain_kv.ok() && rot_kv.ok());
  std::vector<float> lp(static_cast<size_t>(n) * c.n_vocab), lr(lp.size());
  for (int s0 = 0; s0 < n; s0 += 10) {  // prefill chunks, then the next chunk attends to them
    ForwardBatch b;
    for (int i = s0; i < s0 + 10; ++i) b.Add(3 + (i * 37) % 500, i, 0, true);
    ASSERT_TRUE(m->Forward(b, *plain_kv, lp.data() + static_cast<size_t>(s0) * c.n_vocab, nullptr).ok());
    ASSERT_TRUE(m->Forward(b, *rot_kv, lr.data() + static_cast<size_t>(s0) * c.n_vocab, nullptr).ok());
  }
  float max_logit = 0, max_diff = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(lp[i]));
    max_diff = std::max(max_diff, std::fabs(lp[i] - lr[i]));
  }
  // Two orders of f32 summation over head_dim = 64 products and two layers: ~1e-6 relative.
  EXPECT_LE(max_diff, 1e-5f * max_logit) << "max logit " << max_logit;
  const size_t row = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  std::vector<float> k_plain(row), k_rot(row);
  for (int32_t l = 0; l < c.n_layers; ++l)
    for (int32_t pos = 0; pos < n; pos += 13) {
      plain_kv->LoadKey(l, 0, pos, k_plain.data());
      rot_kv->LoadKey(l, 0, pos, k_rot.data());
      kernels::HadamardRotate(k_plain.data(), c.n_kv_heads, c.head_dim);
      float scale = 0;
      for (float v : k_plain) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < row; ++i) ASSERT_NEAR(k_rot[i], k_plain[i], 1e-5f * scale) << l << " " << pos;
    }
}

// Why rotate: keys with a few large channels (as trained models' keys have) lose the small
// channels to q4_0's one scale per 32 values; rotated first, the outliers spread over every
// dim and the scores the cache gives back are much closer to the exact ones.
TEST(KvCacheRotate, SpreadsKeyOutliersBeforeFourBitRounding) {
  constexpr int32_t kHd = 64, kKeys = 48, kQueries = 16;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  KvCacheTypes q4{DType::kQ4_0, DType::kF16};
  auto plain = ContiguousKvCache::Create(1, 1, kKeys, 1, kHd, q4);
  q4.rotate_k = true;
  auto rot = ContiguousKvCache::Create(1, 1, kKeys, 1, kHd, q4);
  ASSERT_TRUE(plain.ok() && rot.ok());
  std::vector<std::vector<float>> keys(kKeys, std::vector<float>(kHd));
  for (int32_t p = 0; p < kKeys; ++p) {
    for (float& v : keys[p]) v = nd(rng);
    keys[p][3] *= 25.f;  // two outlier channels
    keys[p][40] *= -18.f;
    std::vector<float> hk = keys[p];
    kernels::HadamardRotate(hk.data(), 1, kHd);
    plain->StoreKey(0, 0, p, keys[p].data());
    rot->StoreKey(0, 0, p, hk.data());
  }
  double err_plain = 0, err_rot = 0;
  std::vector<float> q(kHd), hq(kHd), kp(kHd), kr(kHd);
  for (int i = 0; i < kQueries; ++i) {
    for (float& v : q) v = nd(rng);
    hq = q;
    kernels::HadamardRotate(hq.data(), 1, kHd);
    for (int32_t p = 0; p < kKeys; ++p) {
      plain->LoadKey(0, 0, p, kp.data());
      rot->LoadKey(0, 0, p, kr.data());
      double exact = 0, s_plain = 0, s_rot = 0;
      for (int d = 0; d < kHd; ++d) {
        exact += static_cast<double>(q[d]) * keys[p][d];
        s_plain += static_cast<double>(q[d]) * kp[d];
        s_rot += static_cast<double>(hq[d]) * kr[d];
      }
      err_plain += std::fabs(s_plain - exact);
      err_rot += std::fabs(s_rot - exact);
    }
  }
  std::printf("[rotate] mean |score error| q4_0 K: plain %.4f, rotated %.4f\n",
              err_plain / (kKeys * kQueries), err_rot / (kKeys * kQueries));
  EXPECT_LT(err_rot, 0.5 * err_plain);
}

TEST(KvCacheRotate, NeedsAPowerOfTwoHeadDim) {
  KvCacheTypes t;
  t.rotate_k = true;
  EXPECT_TRUE(CheckKvCacheTypes(t, 64).ok());
  const Status st = CheckKvCacheTypes(t, 48);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--cache-rotate"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("48"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ferry
