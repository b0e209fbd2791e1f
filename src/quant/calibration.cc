#include "quant/calibration.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "formats/gguf.h"

namespace ferry::quant {

std::string CalibStats::Describe() const {
  return fmt::format("{} ({} windows of {} tokens)", source, n_windows, ctx);
}

StatusOr<CalibStats> Calibrate(const FloatModel& m, const std::vector<int32_t>& tokens, const CalibOptions& o,
                               ThreadPool* pool) {
  if (o.ctx < 2) return InvalidArgumentError("calibration --ctx {} is too small (at least 2)", o.ctx);
  if (o.n_windows < 1) return InvalidArgumentError("calibration --samples must be at least 1");
  const int32_t avail = static_cast<int32_t>(tokens.size() / static_cast<size_t>(o.ctx));
  if (avail == 0)
    return InvalidArgumentError("calibration text '{}' has {} tokens, fewer than one window of {}", o.source,
                                tokens.size(), o.ctx);
  CalibStats s;
  s.source = o.source;
  s.ctx = o.ctx;
  s.n_windows = std::min(avail, o.n_windows);
  const int64_t total = int64_t{s.n_windows} * o.ctx;
  const int64_t stride = std::max<int64_t>(1, (total + o.max_rows - 1) / std::max<int64_t>(o.max_rows, 1));
  // Double accumulators, summed in token order: deterministic whatever the thread count.
  struct Acc {
    std::vector<double> sum_abs, sum_sq;
  };
  std::vector<std::array<Acc, 4>> acc(m.layers.size());
  s.layers.resize(m.layers.size());
  int64_t row0 = 0;  // global row index of the current window's first token
  // Per-head contribution through W_o: sum over tokens of ||W_o[:, h] o_h||_2, [n_layers][n_heads].
  const ModelConfig& mc = m.config;
  std::vector<std::vector<double>> head_sum(m.layers.size(),
                                            std::vector<double>(static_cast<size_t>(mc.n_heads)));
  auto head_hook = [&](int32_t l, const float* x, int64_t n_tok) {
    const std::vector<float>& wo = m.layers[static_cast<size_t>(l)][LinearKind::kO].w;  // [dim, q_dim]
    const int64_t q_dim = int64_t{mc.n_heads} * mc.head_dim;
    for (int64_t t = 0; t < n_tok; ++t)
      for (int32_t h = 0; h < mc.n_heads; ++h) {
        const float* o = x + t * q_dim + int64_t{h} * mc.head_dim;
        double sq = 0;
        for (int64_t r = 0; r < mc.dim; ++r) {
          const float* w = wo.data() + r * q_dim + int64_t{h} * mc.head_dim;
          double d = 0;
          for (int32_t j = 0; j < mc.head_dim; ++j) d += static_cast<double>(w[j]) * o[j];
          sq += d * d;
        }
        head_sum[static_cast<size_t>(l)][static_cast<size_t>(h)] += std::sqrt(sq);
      }
  };
  auto hook = [&](int32_t l, InputKind k, const float* x, int64_t n_tok, int64_t n_in) {
    if (k == InputKind::kAttnOut) head_hook(l, x, n_tok);
    InputStats& st = s.layers[static_cast<size_t>(l)][static_cast<size_t>(k)];
    Acc& a = acc[static_cast<size_t>(l)][static_cast<size_t>(k)];
    if (st.n_in == 0) {
      st.n_in = n_in;
      st.max_abs.assign(static_cast<size_t>(n_in), 0.f);
      a.sum_abs.assign(static_cast<size_t>(n_in), 0.0);
      a.sum_sq.assign(static_cast<size_t>(n_in), 0.0);
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      const float* r = x + t * n_in;
      for (int64_t j = 0; j < n_in; ++j) {
        const float v = std::fabs(r[j]);
        st.max_abs[static_cast<size_t>(j)] = std::max(st.max_abs[static_cast<size_t>(j)], v);
        a.sum_abs[static_cast<size_t>(j)] += v;
        a.sum_sq[static_cast<size_t>(j)] += static_cast<double>(v) * v;
      }
      if ((row0 + t) % stride == 0) st.rows.insert(st.rows.end(), r, r + n_in);
    }
  };
  for (int32_t w = 0; w < s.n_windows; ++w) {
    std::vector<int32_t> win(tokens.begin() + int64_t{w} * o.ctx, tokens.begin() + int64_t{w + 1} * o.ctx);
    if (o.bos >= 0) win[0] = o.bos;
    m.Forward(win, hook, nullptr, pool);
    row0 += o.ctx;
    if (o.progress) o.progress(w + 1, s.n_windows);
  }
  s.n_tokens = total;
  s.head_importance.resize(m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l)
    for (double v : head_sum[l])
      s.head_importance[l].push_back(static_cast<float>(v / static_cast<double>(total)));
  for (size_t l = 0; l < s.layers.size(); ++l) {
    for (size_t k = 0; k < 4; ++k) {
      InputStats& st = s.layers[l][k];
      st.mean_abs.resize(static_cast<size_t>(st.n_in));
      st.l2.resize(static_cast<size_t>(st.n_in));
      for (size_t j = 0; j < st.mean_abs.size(); ++j) {
        st.mean_abs[j] = static_cast<float>(acc[l][k].sum_abs[j] / static_cast<double>(total));
        st.l2[j] = static_cast<float>(std::sqrt(acc[l][k].sum_sq[j]));
      }
    }
  }
  return s;
}

Status SaveCalibStats(const std::string& path, const CalibStats& s) {
  Metadata md;
  md.SetString("general.architecture", "ferry-calibration");
  md.SetString("ferry.calib.source", s.source);
  md.SetInt("ferry.calib.windows", s.n_windows);
  md.SetInt("ferry.calib.ctx", s.ctx);
  md.Set("ferry.calib.tokens", MetaValue::Int(s.n_tokens));
  md.SetInt("ferry.calib.layers", static_cast<int32_t>(s.layers.size()));
  std::vector<formats::GgufTensorToWrite> t;
  for (size_t l = 0; l < s.layers.size(); ++l) {
    for (InputKind k : kAllInputs) {
      const InputStats& st = s.layers[l][static_cast<size_t>(k)];
      const std::string p = fmt::format("blk.{}.{}.", l, InputName(k));
      auto add = [&](const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape) {
        t.push_back({p + name, DType::kF32, std::move(shape), v.data(), v.size() * sizeof(float)});
      };
      add("max_abs", st.max_abs, {st.n_in});
      add("mean_abs", st.mean_abs, {st.n_in});
      add("l2", st.l2, {st.n_in});
      add("rows", st.rows, {st.n_rows(), st.n_in});
    }
    if (l < s.head_importance.size())
      t.push_back({fmt::format("blk.{}.attn_heads.importance", l), DType::kF32,
                   {static_cast<int64_t>(s.head_importance[l].size())}, s.head_importance[l].data(),
                   s.head_importance[l].size() * sizeof(float)});
  }
  return formats::WriteGguf(path, md, t);
}

StatusOr<CalibStats> LoadCalibStats(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(auto src, formats::OpenGguf(path));
  const Metadata& md = src->metadata();
  if (md.GetString("general.architecture").value_or("") != "ferry-calibration")
    return InvalidArgumentError("'{}' is not a calibration file written by `ferry calibrate`", path);
  CalibStats s;
  s.source = md.GetString("ferry.calib.source").value_or("");
  s.n_windows = static_cast<int32_t>(md.GetInt("ferry.calib.windows").value_or(0));
  s.ctx = static_cast<int32_t>(md.GetInt("ferry.calib.ctx").value_or(0));
  s.n_tokens = md.GetInt("ferry.calib.tokens").value_or(0);
  const int64_t n_layers = md.GetInt("ferry.calib.layers").value_or(0);
  s.layers.resize(static_cast<size_t>(std::max<int64_t>(0, n_layers)));
  for (size_t l = 0; l < s.layers.size(); ++l) {
    for (InputKind k : kAllInputs) {
      InputStats& st = s.layers[l][static_cast<size_t>(k)];
      const std::string p = fmt::format("blk.{}.{}.", l, InputName(k));
      auto get = [&](const std::string& name, std::vector<float>* out) -> Status {
        const formats::TensorRef* t = src->FindTensor(p + name);
        if (!t || t->dtype != DType::kF32)
          return CorruptFileError("'{}': f32 tensor '{}' is missing", path, p + name);
        const auto* f = static_cast<const float*>(t->data);
        out->assign(f, f + t->nbytes / sizeof(float));
        return Status::Ok();
      };
      FERRY_RETURN_IF_ERROR(get("max_abs", &st.max_abs));
      FERRY_RETURN_IF_ERROR(get("mean_abs", &st.mean_abs));
      FERRY_RETURN_IF_ERROR(get("l2", &st.l2));
      FERRY_RETURN_IF_ERROR(get("rows", &st.rows));
      st.n_in = static_cast<int64_t>(st.max_abs.size());
    }
    if (const formats::TensorRef* t = src->FindTensor(fmt::format("blk.{}.attn_heads.importance", l));
        t && t->dtype == DType::kF32) {
      const auto* f = static_cast<const float*>(t->data);
      s.head_importance.resize(s.layers.size());
      s.head_importance[l].assign(f, f + t->nbytes / sizeof(float));
    }
  }
  return s;
}

}  // namespace ferry::quant
