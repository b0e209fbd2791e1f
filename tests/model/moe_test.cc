// MoE: router, capacity rule, the grouped-by-expert layer against per-token references (one
// independent in double precision, one through the same kernels for bit-exactness), dropping,
// and whole MoE models (Mixtral-style llama, Qwen2-MoE with a shared expert).
#include "model/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/metadata.h"
#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"
#include "synthetic_layer_fixture.h"
#include "test_util.h"

namespace ferry {
namespace {

struct MoeFixture {
  std::unique_ptr<formats::WeightSource> src;
  ModelConfig cfg;
};

MoeFixture Make(const std::string& preset, DType type) {
  testing::OpenedModel m =
      testing::OpenTestModel(testing::WriteSyntheticTestModel(testing::TempDir(), preset, type));
  MoeFixture f;
  f.src = std::move(m.src);
  f.cfg = m.cfg;
  return f;
}

using testing::RandomRows;

// One [rows, cols] matrix of a tensor holding `index`-th of its stacked matrices, as f32.
std::vector<float> Dequant(const formats::WeightSource& src, const std::string& name, int64_t index,
                           int64_t rows, int64_t cols) {
  const formats::TensorRef* t = src.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  const size_t row_bytes = RowBytes(t->dtype, cols);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    kernels::DequantizeRow(
        t->dtype, static_cast<const uint8_t*>(t->data) + row_bytes * static_cast<size_t>(index * rows + r),
        w.data() + r * cols, cols);
  return w;
}

// The per-token MoE in double precision from dequantized weights: no grouping, no kernels.
// kept(t, rank) says whether the assignment survives the capacity.
template <typename Kept>
std::vector<float> DenseReference(const MoeFixture& f, int32_t layer, const std::vector<float>& x, int64_t n,
                                  Kept kept) {
  const ModelConfig& c = f.cfg;
  const std::string p = "blk." + std::to_string(layer) + ".";
  const int64_t dim = c.dim, ffn = c.expert_ffn_dim;
  auto router = Dequant(*f.src, p + "ffn_gate_inp.weight", 0, c.n_expert, dim);
  auto mlp = [&](const std::vector<float>& g, const std::vector<float>& u, const std::vector<float>& d,
                 int64_t width, const float* xt, std::vector<double>& acc, double w) {
    std::vector<double> h(static_cast<size_t>(width));
    for (int64_t j = 0; j < width; ++j) {
      double gs = 0, us = 0;
      for (int64_t i = 0; i < dim; ++i) {
        gs += double{g[static_cast<size_t>(j * dim + i)]} * xt[i];
        us += double{u[static_cast<size_t>(j * dim + i)]} * xt[i];
      }
      h[static_cast<size_t>(j)] = gs / (1.0 + std::exp(-gs)) * us;
    }
    for (int64_t o = 0; o < dim; ++o) {
      double s = 0;
      for (int64_t j = 0; j < width; ++j)
        s += double{d[static_cast<size_t>(o * width + j)]} * h[static_cast<size_t>(j)];
      acc[static_cast<size_t>(o)] += w * s;
    }
  };
  std::vector<float> out(static_cast<size_t>(n * dim));
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x.data() + t * dim;
    std::vector<float> logits(static_cast<size_t>(c.n_expert));
    for (int32_t e = 0; e < c.n_expert; ++e) {
      double s = 0;
      for (int64_t i = 0; i < dim; ++i) s += double{router[static_cast<size_t>(e * dim + i)]} * xt[i];
      logits[static_cast<size_t>(e)] = static_cast<float>(s);
    }
    TokenRoute route = RouteToken(logits.data(), c.n_expert, c.n_expert_used, c.expert_weights_norm);
    std::vector<double> acc(static_cast<size_t>(dim), 0.0);
    for (int32_t r = 0; r < c.n_expert_used; ++r) {
      if (!kept(t, r)) continue;
      const int64_t e = route.expert[static_cast<size_t>(r)];
      mlp(Dequant(*f.src, p + "ffn_gate_exps.weight", e, ffn, dim),
          Dequant(*f.src, p + "ffn_up_exps.weight", e, ffn, dim),
          Dequant(*f.src, p + "ffn_down_exps.weight", e, dim, ffn), ffn, xt, acc,
          route.weight[static_cast<size_t>(r)]);
    }
    if (c.shared_expert_ffn_dim > 0) {
      const int64_t sh = c.shared_expert_ffn_dim;
      auto g = Dequant(*f.src, p + "ffn_gate_inp_shexp.weight", 0, 1, dim);
      double dot = 0;
      for (int64_t i = 0; i < dim; ++i) dot += double{g[static_cast<size_t>(i)]} * xt[i];
      mlp(Dequant(*f.src, p + "ffn_gate_shexp.weight", 0, sh, dim),
          Dequant(*f.src, p + "ffn_up_shexp.weight", 0, sh, dim),
          Dequant(*f.src, p + "ffn_down_shexp.weight", 0, dim, sh), sh, xt, acc,
          1.0 / (1.0 + std::exp(-dot)));
    }
    for (int64_t o = 0; o < dim; ++o)
      out[static_cast<size_t>(t * dim + o)] = static_cast<float>(acc[static_cast<size_t>(o)]);
  }
  return out;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  double max_abs = 0;
  for (float w : want) max_abs = std::max(max_abs, static_cast<double>(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * max_abs + 1e-6) << "element " << i;
}

TEST(MoeRouter, SoftmaxTopKOrderAndWeights) {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  TokenRoute r = RouteToken(logits, 5, 3, /*normalize=*/true);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 3, 4}));  // tie 1 vs 3: lower index first
  EXPECT_NEAR(r.weight[0] + r.weight[1] + r.weight[2], 1.0, 1e-6);
  EXPECT_FLOAT_EQ(r.weight[0], r.weight[1]);
  TokenRoute u = RouteToken(logits, 5, 2, /*normalize=*/false);
  double z = 0;
  for (float l : logits) z += std::exp(l - 2.0);
  EXPECT_NEAR(u.weight[0], 1.0 / z, 1e-6);  // plain softmax probability, not renormalized
}

TEST(MoeRouter, CapacityRule) {
  // ceil(k * F * tokens / experts)
  EXPECT_EQ(ExpertCapacity(2, 1.0, 10, 8), 3);   // 2.5 -> 3
  EXPECT_EQ(ExpertCapacity(2, 1.0, 16, 8), 4);   // exactly 4
  EXPECT_EQ(ExpertCapacity(2, 1.25, 16, 8), 5);  // exactly 5
  EXPECT_EQ(ExpertCapacity(2, 0.5, 1, 8), 1);    // a single decode token always fits
  EXPECT_EQ(ExpertCapacity(4, 0.1, 3, 60), 1);
  EXPECT_EQ(ExpertCapacity(2, 0.0, 100, 8), std::numeric_limits<int64_t>::max());
}

class MoeLayerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeLayerTest, EqualsDenseReferenceWithoutDropping) {
  Scratch scratch;  // the FFN's buffers, reused across calls
  MoeFixture f = Make(GetParam(), DType::kF32);
  ThreadPool pool(2);
  auto moe = MoeFfn::Load(*f.src, f.cfg, 1, /*repack=*/true, &pool);
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  const int64_t n = 13, dim = f.cfg.dim;
  auto x = RandomRows(n, dim, 7);
  std::vector<float> out(static_cast<size_t>(n * dim));
  SparsityStats stats;
  (*moe)->Forward(x.data(), n, out.data(), 0.0, &stats, scratch, &pool);
  ExpectClose(out, DenseReference(f, 1, x, n, [](int64_t, int32_t) { return true; }), 1e-5);
  EXPECT_EQ(stats.moe_assignments, n * f.cfg.n_expert_used);
  EXPECT_EQ(stats.moe_dropped, 0);
  int64_t load = 0;
  for (int64_t l : stats.expert_load) load += l;
  EXPECT_EQ(load, n * f.cfg.n_expert_used);
}

// Grouped execution vs the same layer run one token at a time: the kernels are
// batch-invariant, so grouping must not change a single bit (quantized weights too).
TEST_P(MoeLayerTest, GroupedEqualsPerTokenBitExact) {
  Scratch scratch;  // the FFN's buffers, reused across calls
  for (DType type : {DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    MoeFixture f = Make(GetParam(), type);
    ThreadPool pool(2);
    auto moe = MoeFfn::Load(*f.src, f.cfg, 0, true, &pool);
    ASSERT_TRUE(moe.ok()) << moe.status().ToString();
    const int64_t n = 17, dim = f.cfg.dim;
    auto x = RandomRows(n, dim, 11);
    std::vector<float> grouped(static_cast<size_t>(n * dim)), single(static_cast<size_t>(n * dim));
    (*moe)->Forward(x.data(), n, grouped.data(), 0.0, nullptr, scratch, &pool);
    for (int64_t t = 0; t < n; ++t)
      (*moe)->Forward(x.data() + t * dim, 1, single.data() + t * dim, 0.0, nullptr, scratch, nullptr);
    EXPECT_EQ(grouped, single) << DTypeName(type);
    // And close to the double-precision reference (activation quantization bounds the error).
    ExpectClose(grouped, DenseReference(f, 0, x, n, [](int64_t, int32_t) { return true; }),
                type == DType::kQ4_0 ? 0.06 : 0.02);
  }
}

// With a capacity factor, each expert keeps exactly its first ceil(k F n / E) assignments in
// token order; the dropped ones contribute nothing (the residual passes) and are counted.
TEST_P(MoeLayerTest, CapacityDropsInTokenOrderAndCounts) {
  Scratch scratch;  // the FFN's buffers, reused across calls
  MoeFixture f = Make(GetParam(), DType::kF32);
  ThreadPool pool(2);
  auto moe = MoeFfn::Load(*f.src, f.cfg, 0, true, &pool);
  ASSERT_TRUE(moe.ok());
  MoeFfn* layer = moe->get();
  const int64_t n = 24, dim = f.cfg.dim;
  const int32_t E = f.cfg.n_expert, k = f.cfg.n_expert_used;
  auto x = RandomRows(n, dim, 5);
  for (double factor : {0.5, 1.0, 2.0}) {
    const int64_t cap = ExpertCapacity(k, factor, n, E);
    // Expected kept set from the reference routing.
    auto router = Dequant(*f.src, "blk.0.ffn_gate_inp.weight", 0, E, dim);
    std::vector<std::vector<uint8_t>> kept(static_cast<size_t>(n),
                                           std::vector<uint8_t>(static_cast<size_t>(k)));
    std::vector<int64_t> seen(static_cast<size_t>(E), 0), want_drop(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> logits(static_cast<size_t>(E));
      for (int32_t e = 0; e < E; ++e) {
        double s = 0;
        for (int64_t i = 0; i < dim; ++i)
          s += double{router[static_cast<size_t>(e * dim + i)]} * x[static_cast<size_t>(t * dim + i)];
        logits[static_cast<size_t>(e)] = static_cast<float>(s);
      }
      TokenRoute r = RouteToken(logits.data(), E, k, f.cfg.expert_weights_norm);
      for (int32_t j = 0; j < k; ++j) {
        const size_t e = static_cast<size_t>(r.expert[static_cast<size_t>(j)]);
        kept[static_cast<size_t>(t)][static_cast<size_t>(j)] = seen[e] < cap;
        if (seen[e]++ >= cap) ++want_drop[e];
      }
    }
    std::vector<float> out(static_cast<size_t>(n * dim));
    SparsityStats stats;
    layer->Forward(x.data(), n, out.data(), factor, &stats, scratch, &pool);
    EXPECT_EQ(stats.expert_dropped, want_drop) << "factor " << factor;
    EXPECT_EQ(stats.expert_load, seen) << "factor " << factor;
    int64_t total_drop = 0;
    for (int64_t d : want_drop) total_drop += d;
    EXPECT_EQ(stats.moe_dropped, total_drop);
    if (factor == 0.5) {
      EXPECT_GT(total_drop, 0);  // 24 tokens, 8 experts: capacity 3 must overflow somewhere
    }
    ExpectClose(out,
                DenseReference(f, 0, x, n,
                               [&](int64_t t, int32_t r) {
                                 return kept[static_cast<size_t>(t)][static_cast<size_t>(r)] != 0;
                               }),
                1e-5);
  }
}

// Older Mixtral GGUFs hold one tensor per expert, whose types may differ. Layer 0 of moe-tiny
// rewritten so, expert 0 in q8_0 and the others in q4_0: each projection's experts cannot share
// one packed buffer (model/moe.cc PackExperts), and the repacked layer computes the bits of the
// in-place one (whose kernels run the packed kernels' float order).
TEST(MoeLayer, PerExpertTensorsOfMixedTypesPack) {
  Scratch scratch;
  MoeFixture f = Make("moe-tiny", DType::kF32);
  const ModelConfig& c = f.cfg;
  const int64_t dim = c.dim, ffn = c.expert_ffn_dim;
  std::vector<std::vector<uint8_t>> store;
  store.reserve(static_cast<size_t>(c.n_expert) * 3);
  std::vector<formats::GgufTensorToWrite> tensors;
  const formats::TensorRef* router = f.src->FindTensor("blk.0.ffn_gate_inp.weight");
  ASSERT_TRUE(router);
  tensors.push_back({router->name, router->dtype, router->shape, router->data, router->nbytes});
  for (const char* which : {"gate", "up", "down"}) {
    const std::string name = std::string("blk.0.ffn_") + which + "_exps.weight";
    const int64_t rows = which[0] == 'd' ? dim : ffn, cols = which[0] == 'd' ? ffn : dim;
    for (int32_t e = 0; e < c.n_expert; ++e) {
      const DType t = e == 0 ? DType::kQ8_0 : DType::kQ4_0;
      const std::vector<float> w = Dequant(*f.src, name, e, rows, cols);
      std::vector<uint8_t>& q = store.emplace_back(RowBytes(t, cols) * static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        kernels::QuantizeRow(t, w.data() + r * cols, q.data() + RowBytes(t, cols) * static_cast<size_t>(r),
                             cols);
      tensors.push_back({std::string("blk.0.ffn_") + which + "." + std::to_string(e) + ".weight",
                         t,
                         {rows, cols},
                         q.data(),
                         q.size()});
    }
  }
  const std::string path = testing::TempDir() + "/moe-mixed-experts.gguf";
  ASSERT_TRUE(formats::WriteGguf(path, f.src->metadata(), tensors, {}).ok());
  auto mixed = formats::OpenWeightSource(path);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ThreadPool pool(2);
  auto packed = MoeFfn::Load(**mixed, c, 0, /*repack=*/true, &pool);
  auto in_place = MoeFfn::Load(**mixed, c, 0, /*repack=*/false, &pool);
  ASSERT_TRUE(packed.ok() && in_place.ok()) << packed.status().ToString();
  const int64_t n = 9;
  auto x = RandomRows(n, dim, 3);
  std::vector<float> a(static_cast<size_t>(n * dim)), b(a.size());
  (*packed)->Forward(x.data(), n, a.data(), 0.0, nullptr, scratch, &pool);
  (*in_place)->Forward(x.data(), n, b.data(), 0.0, nullptr, scratch, &pool);
  EXPECT_EQ(a, b);
}

// A tensor-parallel split of a layer (ExpertSplit): each rank's output is a partial sum, and
// the ranks' outputs add up to the whole layer's, to rounding (the down projections' columns
// are summed in two parts); every rank drops the same assignments under a capacity factor.
TEST(MoeSplit, RanksOutputsSumToTheWholeLayer) {
  for (const char* preset : {"moe-tiny", "qwen2moe-tiny", "qwen3moe-tiny", "gpt-oss-tiny"})
    for (DType type : {DType::kF32, DType::kQ8_0})
      for (double capacity : {0.0, 1.0}) {
        SCOPED_TRACE(std::string(preset) + " " + DTypeName(type) + " capacity " + std::to_string(capacity));
        Scratch scratch;
        MoeFixture f = Make(preset, type);
        ThreadPool pool(2);
        auto whole = MoeFfn::Load(*f.src, f.cfg, 0, true, &pool);
        ASSERT_TRUE(whole.ok()) << whole.status().ToString();
        const int64_t n = 19, dim = f.cfg.dim;
        auto x = RandomRows(n, dim, 5);
        std::vector<float> want(static_cast<size_t>(n * dim)), sum(static_cast<size_t>(n * dim), 0.0f);
        SparsityStats one;
        (*whole)->Forward(x.data(), n, want.data(), capacity, &one, scratch, &pool);
        for (int rank = 0; rank < 2; ++rank) {
          auto part = MoeFfn::Load(*f.src, f.cfg, 0, true, &pool, ExpertSplit{rank, 2});
          ASSERT_TRUE(part.ok()) << part.status().ToString();
          EXPECT_LT((*part)->TotalBytes(), (*whole)->TotalBytes() * 6 / 10);  // the router stays whole
          std::vector<float> out(static_cast<size_t>(n * dim));
          SparsityStats stats;
          (*part)->Forward(x.data(), n, out.data(), capacity, &stats, scratch, &pool);
          EXPECT_EQ(stats.moe_dropped, one.moe_dropped);
          for (size_t i = 0; i < out.size(); ++i) sum[i] += out[i];
        }
        ExpectClose(sum, want, 1e-5);
      }
  // Widths that do not divide, and column ranges that cut a q8_0 block, are errors naming them.
  ThreadPool pool(1);
  MoeFixture f = Make("moe-tiny", DType::kQ8_0);  // experts 128 wide
  auto three = MoeFfn::Load(*f.src, f.cfg, 0, true, &pool, ExpertSplit{0, 3});
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("experts' width 128 of layer 0 does not divide"), std::string::npos)
      << three.status().message();
  auto eight = MoeFfn::Load(*f.src, f.cfg, 0, true, &pool, ExpertSplit{1, 8});  // 16 columns each
  ASSERT_FALSE(eight.ok());
  EXPECT_NE(eight.status().message().find("cut a quantization block"), std::string::npos)
      << eight.status().message();
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeLayerTest, ::testing::Values("moe-tiny", "qwen2moe-tiny"),
                         [](const auto& info) { return info.param == "moe-tiny" ? "Mixtral" : "Qwen2Moe"; });

// Whole MoE models: prefill in chunks equals token by token exactly (no dropping), and a
// capacity factor changes the result and counts drops.
TEST(MoeModel, BatchInvariantWithoutDroppingAndCountsDropsWithCapacity) {
  for (const char* preset : {"moe-tiny", "qwen2moe-tiny"}) {
    MoeFixture f = Make(preset, DType::kQ8_0);
    auto m = CreateModel(*f.src);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const Model& model = **m;
    const int32_t nv = model.config().n_vocab, n = 32;
    SparsityStats stats;
    ForwardOptions fo;
    fo.stats = &stats;
    auto run = [&](int chunk, ThreadPool* pool) {
      auto kv = ContiguousKvCache::Create(model.config().n_layers, 1, 64, model.config().n_kv_heads,
                                          model.config().head_dim);
      EXPECT_TRUE(kv.ok());
      std::vector<float> logits(static_cast<size_t>(n) * nv);
      for (int s = 0; s < n; s += chunk) {
        ForwardBatch b;
        for (int i = s; i < std::min(n, s + chunk); ++i) b.Add(3 + (i * 37) % 500, i, 0, true);
        EXPECT_TRUE(model.Forward(b, *kv, logits.data() + static_cast<size_t>(s) * nv, pool, fo).ok());
      }
      return logits;
    };
    ThreadPool pool(2);
    auto whole = run(n, &pool);
    EXPECT_EQ(whole, run(1, nullptr)) << preset;
    EXPECT_EQ(whole, run(5, &pool)) << preset;
    EXPECT_EQ(stats.moe_dropped, 0);
    EXPECT_EQ(stats.moe_assignments, 3 * n * model.config().n_layers * model.config().n_expert_used);

    SparsityOptions sp;  // per call: the model stays as loaded
    sp.moe_capacity_factor = 0.5;
    fo.sparsity = &sp;
    stats = SparsityStats{};
    auto dropped = run(n, &pool);
    EXPECT_NE(whole, dropped);
    EXPECT_GT(stats.moe_dropped, 0);
    EXPECT_LT(stats.MoeDropRate(), 0.75);
    // One token per step never overflows (capacity >= 1 and its k experts are distinct).
    stats = SparsityStats{};
    EXPECT_EQ(run(1, nullptr), whole);
    EXPECT_EQ(stats.moe_dropped, 0);
    // Decode reads only the active experts.
    EXPECT_LT(model.WeightBytes(), f.src->TensorBytes());
  }
}

// DeepSeek-V3's expert selection bias (blk.L.exp_probs_b.bias) would change which experts run:
// a layer that has one is refused by the tensor's name, not run without it.
TEST(MoeConfig, SelectionBiasIsRefused) {
  MoeFixture f = Make("moe-tiny", DType::kF32);
  std::vector<formats::GgufTensorToWrite> tensors;
  for (const formats::TensorRef& t : f.src->tensors())
    tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
  const std::vector<float> bias(static_cast<size_t>(f.cfg.n_expert), 0.5f);
  tensors.push_back({"blk.1.exp_probs_b.bias", DType::kF32, {f.cfg.n_expert}, bias.data(), bias.size() * 4});
  const std::string path = testing::TempDir() + "/moe-selection-bias.gguf";
  ASSERT_TRUE(formats::WriteGguf(path, f.src->metadata(), tensors, {}).ok());
  auto src = formats::OpenWeightSource(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ThreadPool pool(2);
  ASSERT_TRUE(MoeFfn::Load(**src, f.cfg, 0, true, &pool).ok());
  auto biased = MoeFfn::Load(**src, f.cfg, 1, true, &pool);
  ASSERT_FALSE(biased.ok());
  EXPECT_NE(biased.status().message().find("blk.1.exp_probs_b.bias"), std::string::npos)
      << biased.status().ToString();
}

TEST(MoeConfig, BadExpertCountsAreClearErrors) {
  Metadata md;
  md.SetString("general.architecture", "llama");
  md.SetUint("llama.embedding_length", 64);
  md.SetUint("llama.block_count", 1);
  md.SetUint("llama.feed_forward_length", 128);
  md.SetUint("llama.attention.head_count", 4);
  md.SetUint("llama.vocab_size", 100);
  md.SetUint("llama.expert_count", 8);
  md.SetUint("llama.expert_used_count", 9);
  auto c = ModelConfig::FromMetadata(md);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("expert_used_count"), std::string::npos) << c.status().ToString();
  md.SetUint("llama.expert_used_count", 2);
  c = ModelConfig::FromMetadata(md);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->IsMoe());
  EXPECT_EQ(c->expert_ffn_dim, 128);  // Mixtral: the expert width is feed_forward_length
  EXPECT_TRUE(c->expert_weights_norm);
}

// Expert tensors are checked as every linear is: a transposed stack, a missing tensor, a
// per-expert int8 tensor (W8A8 is for dense linears only) and an uncomputable type are errors
// that name the file and the tensor.
TEST(MoeConfig, BadExpertTensorsAreClearErrors) {
  MoeFixture f = Make("moe-tiny", DType::kF32);
  const ModelConfig& c = f.cfg;
  const int64_t E = c.n_expert, ffn = c.expert_ffn_dim, dim = c.dim;
  const std::vector<int8_t> i8(static_cast<size_t>(ffn * dim), 1);
  const std::vector<float> any(static_cast<size_t>(E * ffn * dim), 0.5f);
  struct Case {
    std::string what, tensor, expect;
    std::function<void(std::vector<formats::GgufTensorToWrite>&)> edit;
  };
  const std::vector<Case> cases = {
      {"transposed stack", "blk.0.ffn_up_exps.weight", "expected [",
       [&](auto& ts) {
         for (auto& t : ts)
           if (t.name == "blk.0.ffn_up_exps.weight") t.shape = {E, dim, ffn};
       }},
      {"missing", "blk.0.ffn_down_exps.weight", "is missing",
       [&](auto& ts) {
         std::erase_if(ts, [](const auto& t) { return t.name == "blk.0.ffn_down_exps.weight"; });
       }},
      {"per-expert W8A8", "blk.0.ffn_gate.0.weight", "no W8A8",
       [&](auto& ts) {
         std::erase_if(ts, [](const auto& t) { return t.name == "blk.0.ffn_gate_exps.weight"; });
         for (int64_t e = 0; e < E; ++e)
           ts.push_back({"blk.0.ffn_gate." + std::to_string(e) + ".weight",
                         e == 0 ? DType::kI8 : DType::kF32,
                         {ffn, dim},
                         e == 0 ? static_cast<const void*>(i8.data()) : any.data(),
                         static_cast<size_t>(ffn * dim) * (e == 0 ? 1 : 4)});
         ts.push_back(
             {"blk.0.ffn_gate.0.weight_scale", DType::kF32, {ffn}, any.data(), static_cast<size_t>(ffn) * 4});
       }},
      {"uncomputable type", "blk.0.ffn_up_exps.weight", "cannot compute",
       [&](auto& ts) {
         for (auto& t : ts)
           if (t.name == "blk.0.ffn_up_exps.weight") {
             t.dtype = DType::kI32;
             t.nbytes = static_cast<size_t>(E * ffn * dim) * 4;
             t.data = any.data();
           }
       }},
  };
  ThreadPool pool(2);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    std::vector<formats::GgufTensorToWrite> tensors;
    for (const formats::TensorRef& t : f.src->tensors())
      tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
    k.edit(tensors);
    const std::string path = testing::TempDir() + "/moe-bad-experts.gguf";
    ASSERT_TRUE(formats::WriteGguf(path, f.src->metadata(), tensors, {}).ok());
    auto src = formats::OpenWeightSource(path);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    auto layer = MoeFfn::Load(**src, c, 0, true, &pool);
    ASSERT_FALSE(layer.ok());
    const std::string msg = layer.status().ToString();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(k.tensor), std::string::npos) << msg;
    EXPECT_NE(msg.find(k.expect), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ferry
