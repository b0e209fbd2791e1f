// Contextual FFN sparsity at run time (model/sparse_ffn.h): the row-sparse decode path and the
// masked dense path both equal a double-precision dense FFN with the same mask, on every ISA;
// whole models: sparsity 0 is the dense model bit for bit, decode agrees with prefill, the
// counters add up; the sidecar round-trips and bad pairings are clear errors.
#include "model/sparse_ffn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "formats/weight_source.h"
#include "isa_guard.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"
#include "synthetic_layer_fixture.h"
#include "test_util.h"

namespace ferry {
namespace {

struct Fixture {
  std::string dir, model_path;
  std::unique_ptr<formats::WeightSource> src;
  ModelConfig cfg;
};

Fixture Make(DType type, const std::string& preset = "tiny") {
  Fixture f;
  f.dir = testing::TempDir();
  f.model_path = testing::WriteSyntheticTestModel(f.dir, preset, type);
  testing::OpenedModel m = testing::OpenTestModel(f.model_path);
  f.src = std::move(m.src);
  f.cfg = m.cfg;
  return f;
}

using testing::RandomRows;

std::vector<float> Dequant(const Linear& lin) {
  std::vector<float> w(static_cast<size_t>(lin.n_out * lin.n_in));
  const size_t rb = RowBytes(lin.type, lin.n_in);
  for (int64_t r = 0; r < lin.n_out; ++r)
    kernels::DequantizeRow(lin.type, static_cast<const uint8_t*>(lin.data) + rb * static_cast<size_t>(r),
                           w.data() + r * lin.n_in, lin.n_in);
  return w;
}

float AbsSilu(float g) {
  return std::fabs(g / (1.0f + std::exp(-g)));
}

// A sidecar whose thresholds are the quantiles of |SiLU(gate)| over `x` ([n, dim]) and whose
// "predictor" is A = 0 with a bias that ranks the neurons in a fixed scrambled order, so the
// kept set of predictor mode is known exactly: the top bias values.
FfnSparsityFile MakeSidecar(const Fixture& f, const std::vector<Linear>& gates, const std::vector<float>& x,
                            int64_t n) {
  FfnSparsityFile s;
  s.n_layers = f.cfg.n_layers;
  s.dim = f.cfg.dim;
  s.ffn = f.cfg.ffn_dim;
  s.rank = 4;
  s.train_sparsity = 0.5;
  s.calib_source = "test";
  for (const Linear& g : gates) {
    std::vector<float> act(static_cast<size_t>(n * s.ffn));
    kernels::MatMul(g.data, g.type, g.n_out, g.n_in, x.data(), n, act.data(), nullptr);
    for (float& v : act) v = AbsSilu(v);
    std::sort(act.begin(), act.end());
    FfnLayerSparsity L;
    for (int32_t i = 0; i <= kFfnGridSteps; ++i)
      L.thresholds.push_back(act[static_cast<size_t>(std::min<int64_t>(
          static_cast<int64_t>(act.size()) - 1, static_cast<int64_t>(act.size()) * i / kFfnGridSteps))]);
    L.pred_a.assign(static_cast<size_t>(s.rank * s.dim), 0.f);
    L.pred_b.assign(static_cast<size_t>(s.ffn * s.rank), 0.5f);
    for (int32_t j = 0; j < s.ffn; ++j) L.pred_bias.push_back(static_cast<float>((j * 37) % s.ffn));
    s.layers.push_back(std::move(L));
  }
  return s;
}

// The dense FFN in double with each token's kept neurons given: out [dim].
std::vector<float> MaskedReference(const std::vector<float>& wg, const std::vector<float>& wu,
                                   const std::vector<float>& wd, const Linear& gate, const float* x,
                                   int64_t dim, int64_t ffn, const std::vector<bool>& keep) {
  std::vector<float> g(static_cast<size_t>(ffn));  // the kernel's gate (the mask is decided on it)
  kernels::MatMul(gate.data, gate.type, ffn, dim, x, 1, g.data(), nullptr);
  std::vector<double> out(static_cast<size_t>(dim), 0.0);
  for (int64_t j = 0; j < ffn; ++j) {
    if (!keep[static_cast<size_t>(j)]) continue;
    double gs = 0, us = 0;
    for (int64_t i = 0; i < dim; ++i) {
      gs += double{wg[static_cast<size_t>(j * dim + i)]} * x[i];
      us += double{wu[static_cast<size_t>(j * dim + i)]} * x[i];
    }
    const double h = gs / (1.0 + std::exp(-gs)) * us;
    for (int64_t o = 0; o < dim; ++o)
      out[static_cast<size_t>(o)] += double{wd[static_cast<size_t>(o * ffn + j)]} * h;
  }
  return std::vector<float>(out.begin(), out.end());
}

class SparseFfnLayerTest : public ::testing::TestWithParam<DType> {};

TEST_P(SparseFfnLayerTest, RowSparseAndMaskedDenseEqualMaskedReferenceEveryIsa) {
  ferry::testing::ScopedIsa isa_guard;
  Scratch scratch;  // the FFN's buffers, reused across calls
  Fixture f = Make(GetParam());
  const int64_t dim = f.cfg.dim, ffn = f.cfg.ffn_dim, n = 6;
  std::vector<Linear> gate, up, down;
  for (int32_t l = 0; l < f.cfg.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    gate.push_back(*LoadLinear(*f.src, p + "ffn_gate.weight", ffn, dim));
    up.push_back(*LoadLinear(*f.src, p + "ffn_up.weight", ffn, dim));
    down.push_back(*LoadLinear(*f.src, p + "ffn_down.weight", dim, ffn));
  }
  const Linear none;
  std::vector<FfnLinears> ffns;
  for (int32_t l = 0; l < f.cfg.n_layers; ++l) ffns.push_back({&gate[l], &up[l], &down[l], &none});
  const std::vector<float> x = RandomRows(n, dim, 11);
  const std::string side = f.dir + "/side.gguf";
  ASSERT_TRUE(SaveFfnSparsity(side, MakeSidecar(f, gate, x, n)).ok());
  ThreadPool pool(2);
  for (const bool predictor : {false, true}) {
    SparsityOptions o;
    (predictor ? o.ffn_predictor : o.ffn_stats) = side;
    o.ffn_sparsity = 0.6;
    auto sp = SparseFfn::Create(o, f.cfg, ffns, &pool);
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    auto file = LoadFfnSparsity(side);
    ASSERT_TRUE(file.ok());
    for (kernels::Isa isa : ferry::testing::TestIsas()) {
      ASSERT_TRUE(isa_guard.Set(isa));
      for (int32_t l = 0; l < f.cfg.n_layers; ++l) {
        const auto wg = Dequant(gate[l]), wu = Dequant(up[l]), wd = Dequant(down[l]);
        SparsityStats st;
        std::vector<float> single(static_cast<size_t>(n * dim)), batched(static_cast<size_t>(n * dim));
        for (int64_t t = 0; t < n; ++t)  // one token per call: the row-sparse kernels
          (*sp)->Forward(l, ffns[l], o, x.data() + t * dim, 1, single.data() + t * dim, &st, scratch, &pool);
        EXPECT_EQ(st.ffn_sparse_tokens, n);
        (*sp)->Forward(l, ffns[l], o, x.data(), n, batched.data(), &st, scratch, &pool);  // masked dense
        EXPECT_EQ(st.ffn_sparse_tokens, n);
        const int64_t n_keep = std::llround(0.4 * static_cast<double>(ffn));
        int64_t kept_total = 0;
        for (int64_t t = 0; t < n; ++t) {
          const float* xt = x.data() + t * dim;
          std::vector<bool> keep(static_cast<size_t>(ffn));
          if (predictor) {  // scores = bias: the n_keep largest biases
            for (int64_t j = 0; j < ffn; ++j)
              keep[static_cast<size_t>(j)] =
                  file->layers[l].pred_bias[static_cast<size_t>(j)] >= ffn - n_keep;
          } else {
            std::vector<float> g(static_cast<size_t>(ffn));
            kernels::MatMul(gate[l].data, gate[l].type, ffn, dim, xt, 1, g.data(), nullptr);
            const float thr = file->layers[l].Threshold(0.6);
            for (int64_t j = 0; j < ffn; ++j)
              keep[static_cast<size_t>(j)] = AbsSilu(g[static_cast<size_t>(j)]) >= thr;
          }
          kept_total += std::count(keep.begin(), keep.end(), true);
          const auto want = MaskedReference(wg, wu, wd, gate[l], xt, dim, ffn, keep);
          double scale = 1e-3;
          for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
          // f16/q8_0 activations are rounded before the dot products (as MatMul does).
          const double tol = (GetParam() == DType::kF32 ? 1e-5 : 2e-2) * scale;
          for (int64_t o2 = 0; o2 < dim; ++o2) {
            ASSERT_NEAR(single[static_cast<size_t>(t * dim + o2)], want[static_cast<size_t>(o2)], tol)
                << kernels::IsaName(isa) << " layer " << l << " token " << t
                << (predictor ? " predictor" : " threshold");
            // Masked dense: down's MatMul rounds h to the weights' activation type (f16, q8_0).
            ASSERT_NEAR(batched[static_cast<size_t>(t * dim + o2)], want[static_cast<size_t>(o2)], tol)
                << kernels::IsaName(isa) << " layer " << l << " token " << t;
          }
        }
        // Counters: both calls skipped exactly what the masks skip.
        EXPECT_EQ(st.ffn_neurons, 2 * n * ffn);
        EXPECT_EQ(st.ffn_skipped, 2 * (n * ffn - kept_total));
        if (predictor) {
          EXPECT_EQ(kept_total, n * n_keep);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, SparseFfnLayerTest, ::testing::Values(DType::kF32, DType::kF16, DType::kQ8_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// Runs n tokens through a model in steps of `chunk`, returning every token's logits.
std::vector<float> RunTokens(const Model& model, int n, int chunk, ThreadPool* pool,
                             const ForwardOptions& fo = {}) {
  const ModelConfig& c = model.config();
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, 64, c.n_kv_heads, c.head_dim);
  EXPECT_TRUE(kv.ok());
  std::vector<float> logits(static_cast<size_t>(n) * c.n_vocab);
  for (int s = 0; s < n; s += chunk) {
    ForwardBatch b;
    for (int i = s; i < std::min(n, s + chunk); ++i) b.Add(3 + (i * 37) % 500, i, 0, true);
    EXPECT_TRUE(model.Forward(b, *kv, logits.data() + static_cast<size_t>(s) * c.n_vocab, pool, fo).ok());
  }
  return logits;
}

TEST(SparseFfnModel, SparsityZeroIsDenseBitExactAndDecodeMatchesPrefill) {
  Fixture f = Make(DType::kF16);
  std::vector<Linear> gate;
  for (int32_t l = 0; l < f.cfg.n_layers; ++l)
    gate.push_back(
        *LoadLinear(*f.src, "blk." + std::to_string(l) + ".ffn_gate.weight", f.cfg.ffn_dim, f.cfg.dim));
  const std::string side = f.dir + "/side.gguf";
  ASSERT_TRUE(SaveFfnSparsity(side, MakeSidecar(f, gate, RandomRows(16, f.cfg.dim, 3), 16)).ok());
  ThreadPool pool(2);
  auto dense = CreateModel(*f.src);
  ASSERT_TRUE(dense.ok());
  const int n = 24;
  const auto want = RunTokens(**dense, n, n, &pool);
  ModelOptions mo;
  mo.sparsity.ffn_stats = side;
  mo.sparsity.ffn_sparsity = 0.5;
  auto sparse = CreateModel(*f.src, mo);
  ASSERT_TRUE(sparse.ok()) << sparse.status().ToString();
  const Model& m = **sparse;
  // Sparsity 0 with the sidecar loaded: the dense model, bit for bit.
  SparsityOptions zero = mo.sparsity;
  zero.ffn_sparsity = 0;
  SparsityStats st;
  ForwardOptions fo;
  fo.sparsity = &zero;
  fo.stats = &st;
  EXPECT_EQ(RunTokens(m, n, n, &pool, fo), want);
  EXPECT_EQ(RunTokens(m, n, 1, nullptr, fo), RunTokens(**dense, n, 1, nullptr));
  EXPECT_EQ(st.ffn_neurons, 0);
  // Sparsity 0.5 (the options it was loaded with): prefill (masked dense) and decode
  // (row-sparse) compute the same function.
  fo.sparsity = nullptr;
  const auto prefill = RunTokens(m, n, n, &pool, fo);
  const auto decode = RunTokens(m, n, 1, &pool, fo);
  EXPECT_NE(prefill, want);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < prefill.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(prefill[i] - decode[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(prefill[i])));
  }
  EXPECT_LT(max_diff, 1e-3 * max_abs);
  EXPECT_EQ(st.ffn_tokens, 2 * n * f.cfg.n_layers);
  EXPECT_EQ(st.ffn_sparse_tokens, n * f.cfg.n_layers);
  EXPECT_EQ(st.ffn_neurons, int64_t{2} * n * f.cfg.n_layers * f.cfg.ffn_dim);
  EXPECT_GT(st.FfnSkippedFraction(), 0.2);  // the thresholds come from other inputs: roughly 0.5
  EXPECT_LT(st.FfnSkippedFraction(), 0.8);
}

TEST(SparseFfnFile, RoundTripAndErrors) {
  Fixture f = Make(DType::kF32);
  std::vector<Linear> gate;
  for (int32_t l = 0; l < f.cfg.n_layers; ++l)
    gate.push_back(
        *LoadLinear(*f.src, "blk." + std::to_string(l) + ".ffn_gate.weight", f.cfg.ffn_dim, f.cfg.dim));
  const FfnSparsityFile s = MakeSidecar(f, gate, RandomRows(8, f.cfg.dim, 5), 8);
  const std::string side = f.dir + "/side.gguf";
  ASSERT_TRUE(SaveFfnSparsity(side, s).ok());
  auto back = LoadFfnSparsity(side);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->n_layers, s.n_layers);
  EXPECT_EQ(back->rank, s.rank);
  EXPECT_EQ(back->train_sparsity, s.train_sparsity);
  for (size_t l = 0; l < s.layers.size(); ++l) {
    EXPECT_EQ(back->layers[l].thresholds, s.layers[l].thresholds);
    EXPECT_EQ(back->layers[l].pred_a, s.layers[l].pred_a);
    EXPECT_EQ(back->layers[l].pred_b, s.layers[l].pred_b);
    EXPECT_EQ(back->layers[l].pred_bias, s.layers[l].pred_bias);
  }
  // Threshold interpolates the grid.
  const auto& t = s.layers[0].thresholds;
  EXPECT_FLOAT_EQ(s.layers[0].Threshold(0.25), t[25]);
  EXPECT_FLOAT_EQ(s.layers[0].Threshold(0.255), 0.5f * (t[25] + t[26]));

  auto load_err = [&](const SparsityOptions& o) {
    ModelOptions mo;
    mo.sparsity = o;
    auto m = CreateModel(*f.src, mo);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.status().ToString();
  };
  SparsityOptions o;
  o.ffn_sparsity = 0.5;  // no sidecar: tell the user to run ferry sparsify
  EXPECT_NE(load_err(o).find("ferry sparsify"), std::string::npos) << load_err(o);
  // A sidecar of another shape: the error names the file and both shapes.
  FfnSparsityFile wrong = s;
  wrong.n_layers += 1;
  wrong.layers.push_back(wrong.layers.back());
  const std::string wrong_path = f.dir + "/wrong.gguf";
  ASSERT_TRUE(SaveFfnSparsity(wrong_path, wrong).ok());
  o.ffn_stats = wrong_path;
  std::string e = load_err(o);
  EXPECT_NE(e.find(wrong_path), std::string::npos) << e;
  EXPECT_NE(e.find("layers"), std::string::npos) << e;
  // A model file is not a sidecar.
  o.ffn_stats = f.model_path;
  e = load_err(o);
  EXPECT_NE(e.find("not an FFN sparsity file"), std::string::npos) << e;
  // Both modes at once.
  o.ffn_stats = side;
  o.ffn_predictor = wrong_path;
  EXPECT_NE(load_err(o).find("not both"), std::string::npos);
  // A MoE model.
  Fixture moe = Make(DType::kF32, "moe-tiny");
  SparsityOptions mo_opts;
  mo_opts.ffn_sparsity = 0.5;
  mo_opts.ffn_stats = side;
  ModelOptions mopt;
  mopt.sparsity = mo_opts;
  auto mm = CreateModel(*moe.src, mopt);
  ASSERT_FALSE(mm.ok());
  EXPECT_NE(mm.status().ToString().find("mixture of experts"), std::string::npos) << mm.status().ToString();
}

}  // namespace
}  // namespace ferry
