#include "quant/awq.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "quant/int4_quant.h"

namespace ferry::quant {
namespace {

// y [n_rows, n_out] = X [n_rows, n_in] W^T (single-threaded: fixed reduction order).
std::vector<float> Outputs(const std::vector<float>& w, int64_t n_out, int64_t n_in, const float* x,
                           int64_t n_rows) {
  std::vector<float> y(static_cast<size_t>(n_rows * n_out));
  kernels::MatMul(w.data(), DType::kF32, n_out, n_in, x, n_rows, y.data(), nullptr);
  return y;
}

double SumSqDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    e += d * d;
  }
  return e;
}

// Q(W diag(s)) diag(s)^-1: the effective weights the scaled, quantized layer computes with.
std::vector<float> ScaledFakeQuant(const FloatLinear& lin, const std::vector<float>& s, int64_t group) {
  std::vector<float> ws(lin.w.size()), wq(lin.w.size());
  for (int64_t o = 0; o < lin.n_out; ++o)
    for (int64_t j = 0; j < lin.n_in; ++j)
      ws[static_cast<size_t>(o * lin.n_in + j)] =
          lin.w[static_cast<size_t>(o * lin.n_in + j)] * s[static_cast<size_t>(j)];
  for (int64_t o = 0; o < lin.n_out; ++o)
    FakeQuantRowInt4(ws.data() + o * lin.n_in, lin.n_in, group, nullptr, wq.data() + o * lin.n_in);
  for (int64_t o = 0; o < lin.n_out; ++o)
    for (int64_t j = 0; j < lin.n_in; ++j)
      wq[static_cast<size_t>(o * lin.n_in + j)] /= s[static_cast<size_t>(j)];
  return wq;
}

}  // namespace

ModuleOutputFn MlpModuleOutput(const FloatLinear& down) {
  return [&down](const std::vector<std::vector<float>>& outs, int64_t n_rows) {
    std::vector<float> h(outs[0].size());  // [n_rows, ffn]
    kernels::SiluMul(outs[0].data(), outs[1].data(), h.data(), static_cast<int64_t>(h.size()));
    return Outputs(down.w, down.n_out, down.n_in, h.data(), n_rows);
  };
}

ScaleSearch SearchAwqScale(const std::vector<const FloatLinear*>& lins, const float* x, int64_t n_rows,
                           const std::vector<float>& s_x_in, int64_t group, int n_grid,
                           const std::vector<int64_t>& tie, const ModuleOutputFn& module, bool duo) {
  const int64_t n_in = lins.front()->n_in;
  std::vector<float> s_x = s_x_in;
  // Duo scaling (AutoAWQ's default): the mean over rows of |w| / max|w| of its group.
  std::vector<float> w_mean(static_cast<size_t>(n_in), 0.f);
  if (duo) {
    int64_t rows = 0;
    for (const FloatLinear* l : lins) {
      for (int64_t o = 0; o < l->n_out; ++o, ++rows) {
        const float* w = l->w.data() + o * n_in;
        for (int64_t j0 = 0; j0 < n_in; j0 += group) {
          const int64_t len = std::min(group, n_in - j0);
          float amax = 0.f;
          for (int64_t j = j0; j < j0 + len; ++j) amax = std::max(amax, std::fabs(w[j]));
          for (int64_t j = j0; j < j0 + len; ++j)
            w_mean[static_cast<size_t>(j)] += std::fabs(w[j]) / (amax + 1e-6f);
        }
      }
    }
    for (float& v : w_mean) v /= static_cast<float>(rows);
  }
  if (!tie.empty()) {  // average within each tie class so tied channels get one scale
    const int64_t n_cls = *std::max_element(tie.begin(), tie.end()) + 1;
    std::vector<double> sum(static_cast<size_t>(n_cls), 0.0);
    std::vector<int64_t> cnt(static_cast<size_t>(n_cls), 0);
    std::vector<double> wsum(static_cast<size_t>(n_cls), 0.0);
    for (int64_t j = 0; j < n_in; ++j) {
      sum[static_cast<size_t>(tie[static_cast<size_t>(j)])] += s_x[static_cast<size_t>(j)];
      wsum[static_cast<size_t>(tie[static_cast<size_t>(j)])] += w_mean[static_cast<size_t>(j)];
      ++cnt[static_cast<size_t>(tie[static_cast<size_t>(j)])];
    }
    for (int64_t j = 0; j < n_in; ++j) {
      const size_t c = static_cast<size_t>(tie[static_cast<size_t>(j)]);
      s_x[static_cast<size_t>(j)] = static_cast<float>(sum[c] / static_cast<double>(cnt[c]));
      w_mean[static_cast<size_t>(j)] = static_cast<float>(wsum[c] / static_cast<double>(cnt[c]));
    }
  }
  // The compared outputs: each linear's, or the module's built from them.
  auto compared = [&](const std::vector<std::vector<float>>& outs) {
    return module ? std::vector<std::vector<float>>{module(outs, n_rows)} : outs;
  };
  std::vector<std::vector<float>> outs;
  for (const FloatLinear* l : lins) outs.push_back(Outputs(l->w, l->n_out, l->n_in, x, n_rows));
  const std::vector<std::vector<float>> ref = compared(outs);
  int64_t n_elems = 0;
  for (const auto& r : ref) n_elems += static_cast<int64_t>(r.size());
  ScaleSearch best;
  best.err = -1;
  // Candidate -1 is RTN (s = 1); then alpha = i / n_grid. Without duo, alpha = 0 is RTN again.
  for (int i = -1; i < n_grid; ++i) {
    const double alpha = i < 0 ? 0.0 : static_cast<double>(i) / n_grid;
    std::vector<float> s(static_cast<size_t>(n_in), 1.f);
    float mx = 0.f, mn = 0.f;
    for (int64_t j = 0; i >= 0 && j < n_in; ++j) {
      double v = std::pow(static_cast<double>(s_x[static_cast<size_t>(j)]), alpha);
      if (duo) v /= std::pow(static_cast<double>(w_mean[static_cast<size_t>(j)]), 1.0 - alpha) + 1e-4;
      s[static_cast<size_t>(j)] = std::max(1e-4f, static_cast<float>(v));
      mx = j == 0 ? s[0] : std::max(mx, s[static_cast<size_t>(j)]);
      mn = j == 0 ? s[0] : std::min(mn, s[static_cast<size_t>(j)]);
    }
    const float norm = i < 0 ? 1.f : std::sqrt(mx * mn);
    for (float& v : s) v /= norm;
    for (size_t li = 0; li < lins.size(); ++li) {
      const FloatLinear& l = *lins[li];
      outs[li] = Outputs(ScaledFakeQuant(l, s, group), l.n_out, l.n_in, x, n_rows);
    }
    const std::vector<std::vector<float>> got = compared(outs);
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err += SumSqDiff(got[i], ref[i]);
    err /= static_cast<double>(std::max<int64_t>(n_elems, 1));
    if (i < 0) best.err_rtn = err;
    if (best.err < 0 || err < best.err) {
      best.err = err;
      best.alpha = alpha;
      best.s = std::move(s);
    }
  }
  return best;
}

std::vector<float> SearchAwqClip(const FloatLinear& lin, const float* x, int64_t n_rows, int64_t group,
                                 int clip_grid, float max_shrink) {
  const int64_t ng = NumGroups(lin.n_in, group);
  std::vector<float> clip(static_cast<size_t>(lin.n_out * ng), 1.f);
  const int steps = std::max(1, static_cast<int>(max_shrink * static_cast<float>(clip_grid)));
  std::vector<float> wq(static_cast<size_t>(group));
  for (int64_t o = 0; o < lin.n_out; ++o) {
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t j0 = g * group, len = std::min(group, lin.n_in - j0);
      const float* w = lin.w.data() + o * lin.n_in + j0;
      double best = -1;
      for (int i = 0; i < steps; ++i) {
        const float c = 1.f - static_cast<float>(i) / static_cast<float>(clip_grid);
        FakeQuantRowInt4(w, len, group, &c, wq.data());
        double err = 0;  // sum over rows of this group's output error squared
        for (int64_t t = 0; t < n_rows; ++t) {
          const float* xr = x + t * lin.n_in + j0;
          double d = 0;
          for (int64_t j = 0; j < len; ++j)
            d += (static_cast<double>(wq[static_cast<size_t>(j)]) - w[j]) * xr[j];
          err += d * d;
        }
        if (best < 0 || err < best) {
          best = err;
          clip[static_cast<size_t>(o * ng + g)] = c;
        }
      }
    }
  }
  return clip;
}

double Int4OutputMse(const FloatLinear& lin, const float* x, int64_t n_rows, int64_t group,
                     const std::vector<float>& clip) {
  const int64_t ng = NumGroups(lin.n_in, group);
  std::vector<float> wq(lin.w.size());
  for (int64_t o = 0; o < lin.n_out; ++o)
    FakeQuantRowInt4(lin.w.data() + o * lin.n_in, lin.n_in, group,
                     clip.empty() ? nullptr : clip.data() + o * ng, wq.data() + o * lin.n_in);
  return SumSqDiff(Outputs(wq, lin.n_out, lin.n_in, x, n_rows),
                   Outputs(lin.w, lin.n_out, lin.n_in, x, n_rows)) /
         static_cast<double>(std::max<int64_t>(lin.n_out * n_rows, 1));
}

void ScaleColumns(FloatLinear& lin, const std::vector<float>& s) {
  for (int64_t o = 0; o < lin.n_out; ++o)
    for (int64_t j = 0; j < lin.n_in; ++j)
      lin.w[static_cast<size_t>(o * lin.n_in + j)] *= s[static_cast<size_t>(j)];
}

void DivideRows(FloatLinear& lin, const std::vector<float>& s_rows) {
  for (int64_t o = 0; o < lin.n_out; ++o)
    for (int64_t j = 0; j < lin.n_in; ++j)
      lin.w[static_cast<size_t>(o * lin.n_in + j)] /= s_rows[static_cast<size_t>(o)];
}

void DivideVector(std::vector<float>& v, const std::vector<float>& s) {
  for (size_t i = 0; i < v.size(); ++i) v[i] /= s[i];
}

std::vector<int64_t> AttnOutTie(const ModelConfig& c) {
  const int64_t hd = c.head_dim, rep = c.n_heads / c.n_kv_heads;
  std::vector<int64_t> tie(static_cast<size_t>(int64_t{c.n_heads} * hd));
  for (int64_t h = 0; h < c.n_heads; ++h)
    for (int64_t d = 0; d < hd; ++d) tie[static_cast<size_t>(h * hd + d)] = (h / rep) * hd + d;
  return tie;
}

void FoldAwqScales(FloatModel& m, int32_t layer, InputKind input, const std::vector<float>& s) {
  FloatLayer& L = m.layers[static_cast<size_t>(layer)];
  switch (input) {
    case InputKind::kAttnIn:
      for (LinearKind k : {LinearKind::kQ, LinearKind::kK, LinearKind::kV}) ScaleColumns(L[k], s);
      DivideVector(L.attn_norm, s);
      break;
    case InputKind::kAttnOut: {
      ScaleColumns(L[LinearKind::kO], s);
      const std::vector<int64_t> tie = AttnOutTie(m.config);
      std::vector<float> s_v(static_cast<size_t>(L[LinearKind::kV].n_out), 1.f);
      for (size_t c = 0; c < tie.size(); ++c) s_v[static_cast<size_t>(tie[c])] = s[c];
      DivideRows(L[LinearKind::kV], s_v);
      if (!L.bv.empty()) DivideVector(L.bv, s_v);
      break;
    }
    case InputKind::kFfnIn:
      for (LinearKind k : {LinearKind::kGate, LinearKind::kUp}) ScaleColumns(L[k], s);
      DivideVector(L.ffn_norm, s);
      break;
    case InputKind::kFfnMid:
      ScaleColumns(L[LinearKind::kDown], s);
      DivideRows(L[LinearKind::kUp], s);
      break;
  }
}

StatusOr<AwqResult> ApplyAwq(FloatModel& m, const CalibStats& stats, const AwqOptions& o) {
  if (stats.layers.size() != m.layers.size())
    return InvalidArgumentError("calibration stats have {} layers, the model {}", stats.layers.size(),
                                m.layers.size());
  AwqResult r;
  const int32_t n_layers = static_cast<int32_t>(m.layers.size());
  for (int32_t l = 0; l < n_layers; ++l) {
    FloatLayer& L = m.layers[static_cast<size_t>(l)];
    for (InputKind in : kAllInputs) {
      const InputStats& st = stats.At(l, in);
      std::vector<LinearKind> kinds;
      for (LinearKind k : kAllLinears)
        if (InputOf(k) == in) kinds.push_back(k);
      if (st.n_in != L[kinds.front()].n_in)
        return InvalidArgumentError("calibration stats for layer {} {} have {} channels, the model {}", l,
                                    InputName(in), st.n_in, L[kinds.front()].n_in);
      std::vector<const FloatLinear*> lins;
      for (LinearKind k : kinds) lins.push_back(&L[k]);
      const std::vector<int64_t> tie =
          in == InputKind::kAttnOut ? AttnOutTie(m.config) : std::vector<int64_t>{};
      const ModuleOutputFn module =
          in == InputKind::kFfnIn && o.mlp_objective ? MlpModuleOutput(L[LinearKind::kDown]) : nullptr;
      ScaleSearch ss = SearchAwqScale(lins, st.rows.data(), st.n_rows(), st.mean_abs, o.group, o.n_grid, tie,
                                      module, o.duo);
      FoldAwqScales(m, l, in, ss.s);
      r.report.push_back({l, kinds.front(), ss.alpha, ss.err, ss.err_rtn});
      if (!o.clip) continue;
      // Clip search on the scaled layer: its input rows are X / s.
      const int64_t n_rows = std::min(st.n_rows(), o.clip_rows);
      const int64_t stride = std::max<int64_t>(1, st.n_rows() / std::max<int64_t>(n_rows, 1));
      std::vector<float> xs(static_cast<size_t>(n_rows * st.n_in));  // [n_rows, n_in]
      for (int64_t t = 0; t < n_rows; ++t)
        for (int64_t j = 0; j < st.n_in; ++j)
          xs[static_cast<size_t>(t * st.n_in + j)] =
              st.rows[static_cast<size_t>(t * stride * st.n_in + j)] / ss.s[static_cast<size_t>(j)];
      for (LinearKind k : kinds) {
        if (k == LinearKind::kQ || k == LinearKind::kK) continue;  // AutoAWQ: clipping q/k hurts attention
        r.clip[{l, k}] = SearchAwqClip(L[k], xs.data(), n_rows, o.group, o.clip_grid, o.max_shrink);
      }
    }
    if (o.progress) o.progress(l + 1, n_layers);
  }
  return r;
}

}  // namespace ferry::quant
