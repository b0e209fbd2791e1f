#include "quant/ffn_sparsify.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"

namespace ferry::quant {
namespace {

// Column-major helpers over row-major double matrices: M[i * cols + j].
using Mat = std::vector<double>;

void Parallel(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  if (pool) {
    pool->ParallelFor(n, f);
  } else {
    f(0, n);
  }
}

// Lower Cholesky factor of the symmetric positive definite a: [n, n] (in place, upper zeroed).
Status Cholesky(Mat& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[static_cast<size_t>(j * n + j)];
    for (int64_t k = 0; k < j; ++k)
      d -= a[static_cast<size_t>(j * n + k)] * a[static_cast<size_t>(j * n + k)];
    if (!(d > 0))
      return InternalError("ffn sparsify: input covariance is not positive definite (column {})", j);
    const double ljj = std::sqrt(d);
    a[static_cast<size_t>(j * n + j)] = ljj;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[static_cast<size_t>(i * n + j)];
      for (int64_t k = 0; k < j; ++k)
        s -= a[static_cast<size_t>(i * n + k)] * a[static_cast<size_t>(j * n + k)];
      a[static_cast<size_t>(i * n + j)] = s / ljj;
    }
    for (int64_t i = 0; i < j; ++i) a[static_cast<size_t>(i * n + j)] = 0;
  }
  return Status::Ok();
}

// Orthonormalizes the r columns of q: [n, r] (modified Gram-Schmidt, twice for stability); a
// column that collapses becomes the first unit vector orthogonal enough to the others.
void Orthonormalize(Mat& q, int64_t n, int64_t r) {
  auto col_dot = [&](int64_t a, int64_t b) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      s += q[static_cast<size_t>(i * r + a)] * q[static_cast<size_t>(i * r + b)];
    return s;
  };
  for (int64_t c = 0; c < r; ++c) {
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t p = 0; p < c; ++p) {
        const double d = col_dot(p, c);
        for (int64_t i = 0; i < n; ++i)
          q[static_cast<size_t>(i * r + c)] -= d * q[static_cast<size_t>(i * r + p)];
      }
    double nrm = std::sqrt(col_dot(c, c));
    for (int64_t e = 0; nrm < 1e-12 && e < n; ++e) {  // degenerate: try unit vectors in order
      for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(i * r + c)] = i == e ? 1.0 : 0.0;
      for (int64_t p = 0; p < c; ++p) {
        const double d = col_dot(p, c);
        for (int64_t i = 0; i < n; ++i)
          q[static_cast<size_t>(i * r + c)] -= d * q[static_cast<size_t>(i * r + p)];
      }
      nrm = std::sqrt(col_dot(c, c));
    }
    for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(i * r + c)] /= nrm;
  }
}

// Deterministic start for the subspace iteration (splitmix64 -> [-1, 1)).
Mat StartBasis(int64_t n, int64_t r) {
  Mat q(static_cast<size_t>(n * r));
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (double& v : q) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v = static_cast<double>(z >> 11) / static_cast<double>(uint64_t{1} << 52) - 1.0;
  }
  return q;
}

// Ascending quantiles of v (sorted in place): entry i is the smallest value that skips
// floor(i / steps * size) values; the last entry skips all of them.
std::vector<float> Quantiles(std::vector<float>& v) {
  std::sort(v.begin(), v.end());
  std::vector<float> q(static_cast<size_t>(kFfnGridSteps + 1));
  const auto m = static_cast<int64_t>(v.size());
  for (int32_t i = 0; i < kFfnGridSteps; ++i)
    q[static_cast<size_t>(i)] = v[static_cast<size_t>(std::min<int64_t>(m - 1, m * i / kFfnGridSteps))];
  q[kFfnGridSteps] = std::nextafter(v.back(), std::numeric_limits<float>::infinity());
  return q;
}

}  // namespace

std::vector<float> GatePreActivations(const FloatModel& m, int32_t layer, const float* x, int64_t n,
                                      ThreadPool* pool) {
  const FloatLinear& g = m.layers[static_cast<size_t>(layer)][LinearKind::kGate];
  std::vector<float> out(static_cast<size_t>(n * g.n_out));  // [n, ffn]
  kernels::MatMul(g.w.data(), DType::kF32, g.n_out, g.n_in, x, n, out.data(), pool);
  return out;
}

std::vector<float> AbsSiluGate(const FloatModel& m, int32_t layer, const float* x, int64_t n,
                               ThreadPool* pool) {
  std::vector<float> out = GatePreActivations(m, layer, x, n, pool);
  for (float& v : out) v = std::fabs(v / (1.0f + std::exp(-v)));  // as model/sparse_ffn.cc
  return out;
}

std::vector<float> PredictorScores(const FfnSparsityFile& f, int32_t layer, const float* x, int64_t n) {
  const FfnLayerSparsity& L = f.layers[static_cast<size_t>(layer)];
  std::vector<float> z(static_cast<size_t>(n * f.rank)),
      out(static_cast<size_t>(n * f.ffn));  // [n, r], [n, ffn]
  kernels::MatMul(L.pred_a.data(), DType::kF32, f.rank, f.dim, x, n, z.data(), nullptr);
  kernels::MatMul(L.pred_b.data(), DType::kF32, f.ffn, f.rank, z.data(), n, out.data(), nullptr);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < f.ffn; ++j) {
      const float g = out[static_cast<size_t>(t * f.ffn + j)] + L.pred_bias[static_cast<size_t>(j)];
      out[static_cast<size_t>(t * f.ffn + j)] = std::fabs(g / (1.0f + std::exp(-g)));
    }
  return out;
}

double PredictorRecall(const FfnSparsityFile& f, int32_t layer, const float* x, const std::vector<float>& act,
                       int64_t n, double sparsity) {
  const std::vector<float> sc = PredictorScores(f, layer, x, n);  // [n, ffn]
  const float thr = f.layers[static_cast<size_t>(layer)].Threshold(sparsity);
  const int64_t ffn = f.ffn;
  const int64_t k = std::clamp<int64_t>(std::llround((1.0 - sparsity) * static_cast<double>(ffn)), 1, ffn);
  std::vector<int32_t> order(static_cast<size_t>(ffn));
  int64_t hit = 0, above = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* s = sc.data() + t * ffn;
    for (int32_t j = 0; j < ffn; ++j) order[static_cast<size_t>(j)] = j;
    std::nth_element(order.begin(), order.begin() + k - 1, order.end(),
                     [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    for (int64_t j = 0; j < ffn; ++j) above += act[static_cast<size_t>(t * ffn + j)] >= thr;
    for (int64_t i = 0; i < k; ++i)
      hit += act[static_cast<size_t>(t * ffn + order[static_cast<size_t>(i)])] >= thr;
  }
  return above > 0 ? static_cast<double>(hit) / static_cast<double>(above) : 1.0;
}

namespace {

// One layer's least-squares problem: centered inputs xc = x - mean [n, dim], the targets' mean
// mu [ffn], the ridge-regularized normal matrix S = xc^T xc + lambda I [dim, dim] (Cholesky
// factored in place: S = Lc Lc^T) and C = xc^T g [dim, ffn] (= xc^T (g - mu)).
struct RidgeSystem {
  std::vector<double> mean, mu;
  Mat s, c;
};

StatusOr<RidgeSystem> BuildRidgeSystem(const float* x, const std::vector<float>& gate, int64_t n, int64_t dim,
                                       int64_t ffn, double ridge, ThreadPool* pool) {
  RidgeSystem r;
  r.mean.assign(static_cast<size_t>(dim), 0.0);
  r.mu.assign(static_cast<size_t>(ffn), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t d = 0; d < dim; ++d) r.mean[static_cast<size_t>(d)] += x[t * dim + d];
  for (double& v : r.mean) v /= static_cast<double>(n);
  Mat xc(static_cast<size_t>(n * dim));  // [n, dim]
  for (int64_t t = 0; t < n; ++t)
    for (int64_t d = 0; d < dim; ++d)
      xc[static_cast<size_t>(t * dim + d)] = x[t * dim + d] - r.mean[static_cast<size_t>(d)];
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < ffn; ++j) r.mu[static_cast<size_t>(j)] += gate[static_cast<size_t>(t * ffn + j)];
  for (double& v : r.mu) v /= static_cast<double>(n);

  r.s.assign(static_cast<size_t>(dim * dim), 0.0);
  r.c.assign(static_cast<size_t>(dim * ffn), 0.0);
  Parallel(pool, dim, [&](int64_t d0, int64_t d1) {
    for (int64_t a = d0; a < d1; ++a)
      for (int64_t t = 0; t < n; ++t) {
        const double xa = xc[static_cast<size_t>(t * dim + a)];
        for (int64_t b = 0; b < dim; ++b)
          r.s[static_cast<size_t>(a * dim + b)] += xa * xc[static_cast<size_t>(t * dim + b)];
        double* crow = r.c.data() + a * ffn;
        const float* gt = gate.data() + t * ffn;
        for (int64_t j = 0; j < ffn; ++j) crow[j] += xa * gt[j];
      }
  });
  double trace = 0;
  for (int64_t d = 0; d < dim; ++d) trace += r.s[static_cast<size_t>(d * dim + d)];
  const double lambda = ridge * std::max(trace / static_cast<double>(dim), 1e-30);
  for (int64_t d = 0; d < dim; ++d) r.s[static_cast<size_t>(d * dim + d)] += lambda;
  FERRY_RETURN_IF_ERROR(Cholesky(r.s, dim));
  return r;
}

// k := Lc^-1 k, column by column (forward substitution); k: [dim, ffn].
void ForwardSubstitute(const Mat& lc, Mat& k, int64_t dim, int64_t ffn, ThreadPool* pool) {
  Parallel(pool, ffn, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < dim; ++i) {
        double v = k[static_cast<size_t>(i * ffn + j)];
        for (int64_t q = 0; q < i; ++q)
          v -= lc[static_cast<size_t>(i * dim + q)] * k[static_cast<size_t>(q * ffn + j)];
        k[static_cast<size_t>(i * ffn + j)] = v / lc[static_cast<size_t>(i * dim + i)];
      }
  });
}

// k := Lc^-T k, column by column (back substitution); k: [dim, ffn].
void BackSubstitute(const Mat& lc, Mat& k, int64_t dim, int64_t ffn, ThreadPool* pool) {
  Parallel(pool, ffn, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = dim - 1; i >= 0; --i) {
        double v = k[static_cast<size_t>(i * ffn + j)];
        for (int64_t q = i + 1; q < dim; ++q)
          v -= lc[static_cast<size_t>(q * dim + i)] * k[static_cast<size_t>(q * ffn + j)];
        k[static_cast<size_t>(i * ffn + j)] = v / lc[static_cast<size_t>(i * dim + i)];
      }
  });
}

// out [n, r] = M u for M [n, inner] = m, or M = m^T when m is [inner, n]; u: [inner, r].
Mat Project(const Mat& m, int64_t n, int64_t inner, bool transposed, const Mat& u, int64_t r) {
  Mat out(static_cast<size_t>(n * r), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < inner; ++s) {
      const double v = m[static_cast<size_t>(transposed ? s * n + i : i * inner + s)];
      for (int64_t q = 0; q < r; ++q)
        out[static_cast<size_t>(i * r + q)] += v * u[static_cast<size_t>(s * r + q)];
    }
  return out;
}

// K's top-r right singular subspace V [ffn, r]: subspace iteration on K K^T for its left
// subspace U [dim, r], then V = orth(K^T U). k: [dim, ffn].
Mat TopRightSubspace(const Mat& k, int64_t dim, int64_t ffn, int64_t r, int32_t iters, ThreadPool* pool) {
  Mat kk(static_cast<size_t>(dim * dim), 0.0);  // K K^T [dim, dim]
  Parallel(pool, dim, [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a)
      for (int64_t b = 0; b < dim; ++b) {
        double v = 0;
        for (int64_t j = 0; j < ffn; ++j)
          v += k[static_cast<size_t>(a * ffn + j)] * k[static_cast<size_t>(b * ffn + j)];
        kk[static_cast<size_t>(a * dim + b)] = v;
      }
  });
  Mat u = StartBasis(dim, r);  // [dim, r]
  Orthonormalize(u, dim, r);
  for (int32_t it = 0; it < iters; ++it) {
    Mat nu = Project(kk, dim, dim, /*transposed=*/false, u, r);  // [dim, r]
    Orthonormalize(nu, dim, r);
    u = std::move(nu);
  }
  Mat v = Project(k, ffn, dim, /*transposed=*/true, u, r);  // K^T U [ffn, r]
  Orthonormalize(v, ffn, r);
  return v;
}

// The predictor from the ridge solution W [dim, ffn] and V [ffn, r]: A = (W V)^T [r, dim],
// B = V, and since the scores are B (A (x - mean)) + mu = B A x + (mu - B A mean), that bias.
void SetPredictor(const Mat& w, const Mat& v, const RidgeSystem& sys, int64_t dim, int64_t ffn, int64_t r,
                  FfnLayerSparsity& L) {
  L.pred_a.assign(static_cast<size_t>(r * dim), 0.f);
  L.pred_b.resize(static_cast<size_t>(ffn * r));
  L.pred_bias.resize(static_cast<size_t>(ffn));
  std::vector<double> a(static_cast<size_t>(r * dim), 0.0);  // [r, dim]
  for (int64_t d = 0; d < dim; ++d)
    for (int64_t j = 0; j < ffn; ++j) {
      const double wj = w[static_cast<size_t>(d * ffn + j)];
      for (int64_t q = 0; q < r; ++q)
        a[static_cast<size_t>(q * dim + d)] += wj * v[static_cast<size_t>(j * r + q)];
    }
  std::vector<double> am(static_cast<size_t>(r), 0.0);  // A mean [r]
  for (int64_t q = 0; q < r; ++q)
    for (int64_t d = 0; d < dim; ++d)
      am[static_cast<size_t>(q)] += a[static_cast<size_t>(q * dim + d)] * sys.mean[static_cast<size_t>(d)];
  for (size_t i = 0; i < a.size(); ++i) L.pred_a[i] = static_cast<float>(a[i]);
  for (int64_t j = 0; j < ffn; ++j) {
    double b = sys.mu[static_cast<size_t>(j)];
    for (int64_t q = 0; q < r; ++q) {
      L.pred_b[static_cast<size_t>(j * r + q)] = static_cast<float>(v[static_cast<size_t>(j * r + q)]);
      b -= v[static_cast<size_t>(j * r + q)] * am[static_cast<size_t>(q)];
    }
    L.pred_bias[static_cast<size_t>(j)] = static_cast<float>(b);
  }
}

}  // namespace

StatusOr<FfnSparsityFile> TrainFfnSparsity(const FloatModel& m, const CalibStats& stats,
                                           const FfnSparsifyOptions& o, ThreadPool* pool) {
  const ModelConfig& c = m.config;
  if (c.IsMoe())
    return UnsupportedError(
        "ferry sparsify: FFN sparsity needs dense FFNs; this model is a mixture of experts");
  if (!(o.train_sparsity > 0 && o.train_sparsity < 1))
    return InvalidArgumentError("--sparsity {} must be in (0, 1)", o.train_sparsity);
  if (stats.layers.size() != m.layers.size())
    return InvalidArgumentError("calibration stats have {} layers, the model {}", stats.layers.size(),
                                m.layers.size());
  const int64_t dim = c.dim, ffn = c.ffn_dim;
  const int64_t r =
      std::clamp<int64_t>(o.rank > 0 ? o.rank : std::min<int64_t>(64, dim / 2), 1, std::min(dim, ffn));
  FfnSparsityFile f;
  f.n_layers = c.n_layers;
  f.dim = c.dim;
  f.ffn = c.ffn_dim;
  f.rank = static_cast<int32_t>(r);
  f.train_sparsity = o.train_sparsity;
  f.calib_source = stats.Describe();
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const InputStats& in = stats.At(l, InputKind::kFfnIn);
    const int64_t n = in.n_rows();
    if (in.n_in != dim || n < 2)
      return InvalidArgumentError(
          "calibration stats for layer {} have {} ffn_in rows of {} channels; need >= 2 of {}", l, n, in.n_in,
          dim);
    f.calib_rows = n;
    const float* x = in.rows.data();                                       // [n, dim]
    const std::vector<float> gate = GatePreActivations(m, l, x, n, pool);  // [n, ffn] the targets
    FfnLayerSparsity L;
    {
      std::vector<float> act = gate;  // [n, ffn] |SiLU(gate)|
      for (float& v : act) v = std::fabs(v / (1.0f + std::exp(-v)));
      L.thresholds = Quantiles(act);
    }
    FERRY_ASSIGN_OR_RETURN(RidgeSystem sys, BuildRidgeSystem(x, gate, n, dim, ffn, o.ridge, pool));
    // Ridge solution W = S^-1 C = Lc^-T K with K = Lc^-1 C [dim, ffn]; the fitted scores' Gram
    // matrix W^T S W = K^T K, so the best rank-r fit keeps K's top right singular subspace V.
    Mat k = std::move(sys.c);
    ForwardSubstitute(sys.s, k, dim, ffn, pool);
    const Mat v = TopRightSubspace(k, dim, ffn, r, o.subspace_iters, pool);
    BackSubstitute(sys.s, k, dim, ffn, pool);  // k is now W
    SetPredictor(k, v, sys, dim, ffn, r, L);
    f.layers.push_back(std::move(L));
    if (o.progress) o.progress(l + 1, c.n_layers);
  }
  return f;
}

}  // namespace ferry::quant
