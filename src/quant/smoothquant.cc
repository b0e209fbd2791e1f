#include "quant/smoothquant.h"

#include <algorithm>
#include <cmath>

#include "quant/awq.h"
#include "quant/int4_quant.h"

namespace ferry::quant {

std::vector<float> SmoothingScales(const std::vector<const FloatLinear*>& lins,
                                   const std::vector<float>& x_max, double alpha) {
  const int64_t n_in = lins.front()->n_in;
  std::vector<float> w_max(static_cast<size_t>(n_in), 0.f);
  for (const FloatLinear* l : lins)
    for (int64_t o = 0; o < l->n_out; ++o)
      for (int64_t j = 0; j < n_in; ++j)
        w_max[static_cast<size_t>(j)] =
            std::max(w_max[static_cast<size_t>(j)], std::fabs(l->w[static_cast<size_t>(o * n_in + j)]));
  std::vector<float> s(static_cast<size_t>(n_in));
  for (int64_t j = 0; j < n_in; ++j) {
    // Clamped as the reference implementation (smoothquant/smooth.py) does.
    const double xm = std::max(1e-5, static_cast<double>(x_max[static_cast<size_t>(j)]));
    const double wm = std::max(1e-5, static_cast<double>(w_max[static_cast<size_t>(j)]));
    s[static_cast<size_t>(j)] =
        static_cast<float>(std::max(1e-5, std::pow(xm, alpha) / std::pow(wm, 1.0 - alpha)));
  }
  return s;
}

Status ApplySmoothQuant(FloatModel& m, CalibStats& stats, double alpha) {
  if (stats.layers.size() != m.layers.size())
    return InvalidArgumentError("calibration stats have {} layers, the model {}", stats.layers.size(),
                                m.layers.size());
  if (!(alpha >= 0.0 && alpha <= 1.0)) return InvalidArgumentError("--alpha {} must be in [0, 1]", alpha);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    FloatLayer& L = m.layers[l];
    for (InputKind in : {InputKind::kAttnIn, InputKind::kFfnIn}) {
      InputStats& st = stats.layers[l][static_cast<size_t>(in)];
      std::vector<const FloatLinear*> lins;
      if (in == InputKind::kAttnIn) {
        lins = {&L[LinearKind::kQ], &L[LinearKind::kK], &L[LinearKind::kV]};
      } else {
        lins = {&L[LinearKind::kGate], &L[LinearKind::kUp]};
      }
      if (st.n_in != lins.front()->n_in)
        return InvalidArgumentError("calibration stats for layer {} {} have {} channels, the model {}", l,
                                    InputName(in), st.n_in, lins.front()->n_in);
      const std::vector<float> s = SmoothingScales(lins, st.max_abs, alpha);
      FoldAwqScales(m, static_cast<int32_t>(l), in, s);  // same fold: columns *= s, norm /= s
      for (int64_t j = 0; j < st.n_in; ++j) {
        st.max_abs[static_cast<size_t>(j)] /= s[static_cast<size_t>(j)];
        st.mean_abs[static_cast<size_t>(j)] /= s[static_cast<size_t>(j)];
        st.l2[static_cast<size_t>(j)] /= s[static_cast<size_t>(j)];
      }
      for (size_t i = 0; i < st.rows.size(); ++i) st.rows[i] /= s[i % static_cast<size_t>(st.n_in)];
    }
  }
  return Status::Ok();
}

StatusOr<PayloadMap> QuantizeW8A8(const FloatModel& m, const CalibStats* stats, const W8A8Options& o) {
  if (o.static_act && !stats)
    return InvalidArgumentError("static activation scales need calibration (--calib)");
  PayloadMap out;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    for (LinearKind k : kAllLinears) {
      const FloatLinear& lin = m.layers[l][k];
      LinearPayload p;
      p.type = DType::kI8;
      std::vector<int8_t> q;
      QuantizeMatrixInt8PerChannel(lin.w, lin.n_out, lin.n_in, &q, &p.weight_scale);
      p.bytes.assign(reinterpret_cast<const uint8_t*>(q.data()),
                     reinterpret_cast<const uint8_t*>(q.data()) + q.size());
      if (o.static_act) {
        const InputStats& st = stats->At(static_cast<int32_t>(l), InputOf(k));
        const float amax = *std::max_element(st.max_abs.begin(), st.max_abs.end());
        p.input_scale = amax / 127.f;
      }
      out[{static_cast<int32_t>(l), k}] = std::move(p);
    }
  }
  return out;
}

FloatModel FakeQuantW8A8Model(const FloatModel& m, const PayloadMap& payloads) {
  FloatModel f = m;
  for (const auto& [key, p] : payloads) {
    if (p.type != DType::kI8) continue;
    FloatLinear& lin = f.layers[static_cast<size_t>(key.first)][key.second];
    const auto* q = reinterpret_cast<const int8_t*>(p.bytes.data());
    for (int64_t o = 0; o < lin.n_out; ++o)
      for (int64_t j = 0; j < lin.n_in; ++j)
        lin.w[static_cast<size_t>(o * lin.n_in + j)] =
            static_cast<float>(q[o * lin.n_in + j]) * p.weight_scale[static_cast<size_t>(o)];
  }
  return f;
}

ActQuantHook W8A8ActHook(const PayloadMap& payloads) {
  return [&payloads](int32_t layer, LinearKind kind, float* x, int64_t n_tok, int64_t n) {
    auto it = payloads.find({layer, kind});
    if (it == payloads.end() || it->second.type != DType::kI8) return;
    if (it->second.input_scale) {
      FakeQuantActInt8Static(x, n_tok * n, *it->second.input_scale);
    } else {
      FakeQuantActInt8PerToken(x, n_tok, n);
    }
  };
}

}  // namespace ferry::quant
