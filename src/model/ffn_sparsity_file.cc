#include "model/ffn_sparsity_file.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "formats/gguf.h"

namespace ferry {

namespace {
constexpr const char* kArch = "ferry-ffn-sparsity";
constexpr int32_t kVersion = 1;
}  // namespace

float FfnLayerSparsity::Threshold(double sparsity) const {
  if (thresholds.empty()) return 0.f;
  const double pos = std::clamp(sparsity, 0.0, 1.0) * kFfnGridSteps;
  const auto i = static_cast<size_t>(std::min<double>(std::floor(pos), kFfnGridSteps - 1));
  const double f = pos - static_cast<double>(i);
  return static_cast<float>(thresholds[i] + f * (thresholds[i + 1] - thresholds[i]));
}

Status FfnSparsityFile::CheckMatches(const ModelConfig& c, const std::string& path) const {
  if (c.IsMoe())
    return UnsupportedError(
        "'{}': FFN sparsity applies to dense FFNs; this model is a mixture of experts "
        "(use --moe-capacity-factor)",
        path);
  if (n_layers != c.n_layers || dim != c.dim || ffn != c.ffn_dim)
    return InvalidArgumentError(
        "'{}' was made for a model with {} layers, dim {}, ffn {}; this model has {} layers, dim {}, ffn {} "
        "(run `ferry sparsify` on this model)",
        path, n_layers, dim, ffn, c.n_layers, c.dim, c.ffn_dim);
  return Status::Ok();
}

Status SaveFfnSparsity(const std::string& path, const FfnSparsityFile& f) {
  Metadata md;
  md.SetString("general.architecture", kArch);
  md.SetInt("ferry.sparsify.version", kVersion);
  md.SetInt("ferry.sparsify.layers", f.n_layers);
  md.SetInt("ferry.sparsify.dim", f.dim);
  md.SetInt("ferry.sparsify.ffn", f.ffn);
  md.SetInt("ferry.sparsify.rank", f.rank);
  md.SetInt("ferry.sparsify.grid_steps", kFfnGridSteps);
  md.SetFloat("ferry.sparsify.train_sparsity", f.train_sparsity);
  md.SetString("ferry.sparsify.calib_source", f.calib_source);
  md.Set("ferry.sparsify.calib_rows", MetaValue::Int(f.calib_rows));
  std::vector<formats::GgufTensorToWrite> t;
  for (size_t l = 0; l < f.layers.size(); ++l) {
    const FfnLayerSparsity& L = f.layers[l];
    const std::string p = fmt::format("blk.{}.", l);
    auto add = [&](const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape) {
      t.push_back({p + name, DType::kF32, std::move(shape), v.data(), v.size() * sizeof(float)});
    };
    add("ffn_gate_thresholds", L.thresholds, {kFfnGridSteps + 1});
    add("ffn_pred_a", L.pred_a, {f.rank, f.dim});
    add("ffn_pred_b", L.pred_b, {f.ffn, f.rank});
    add("ffn_pred_bias", L.pred_bias, {f.ffn});
  }
  return formats::WriteGguf(path, md, t);
}

StatusOr<FfnSparsityFile> LoadFfnSparsity(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(auto src, formats::OpenGguf(path));
  const Metadata& md = src->metadata();
  if (md.GetString("general.architecture").value_or("") != kArch)
    return InvalidArgumentError("'{}' is not an FFN sparsity file (make one with `ferry sparsify`)", path);
  if (md.GetInt("ferry.sparsify.version").value_or(0) != kVersion)
    return UnsupportedError("'{}': ferry.sparsify.version {} is not supported (expected {})", path,
                            md.GetInt("ferry.sparsify.version").value_or(0), kVersion);
  FfnSparsityFile f;
  auto get_int = [&](const char* key, int32_t* out) -> Status {
    auto v = md.GetInt(key);
    if (!v || *v <= 0 || *v > (int64_t{1} << 30))
      return CorruptFileError("'{}': key '{}' is missing or invalid", path, key);
    *out = static_cast<int32_t>(*v);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(get_int("ferry.sparsify.layers", &f.n_layers));
  FERRY_RETURN_IF_ERROR(get_int("ferry.sparsify.dim", &f.dim));
  FERRY_RETURN_IF_ERROR(get_int("ferry.sparsify.ffn", &f.ffn));
  FERRY_RETURN_IF_ERROR(get_int("ferry.sparsify.rank", &f.rank));
  if (md.GetInt("ferry.sparsify.grid_steps").value_or(0) != kFfnGridSteps)
    return CorruptFileError("'{}': ferry.sparsify.grid_steps must be {}", path, kFfnGridSteps);
  f.train_sparsity = md.GetFloat("ferry.sparsify.train_sparsity").value_or(-1);
  if (!(f.train_sparsity > 0 && f.train_sparsity < 1))
    return CorruptFileError("'{}': ferry.sparsify.train_sparsity must be in (0, 1)", path);
  f.calib_source = md.GetString("ferry.sparsify.calib_source").value_or("");
  f.calib_rows = md.GetInt("ferry.sparsify.calib_rows").value_or(0);
  f.layers.resize(static_cast<size_t>(f.n_layers));
  for (int32_t l = 0; l < f.n_layers; ++l) {
    FfnLayerSparsity& L = f.layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    auto get = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float>* out) -> Status {
      const formats::TensorRef* t = src->FindTensor(p + name);
      if (!t) return CorruptFileError("'{}': tensor '{}' is missing", path, p + name);
      if (t->dtype != DType::kF32 || t->shape != shape)
        return CorruptFileError("'{}': tensor '{}' must be f32 of shape {}", path, p + name,
                                fmt::format("[{}]", fmt::join(shape, ", ")));
      const auto* v = static_cast<const float*>(t->data);
      out->assign(v, v + t->nbytes / sizeof(float));
      for (float x : *out)
        if (!std::isfinite(x))
          return CorruptFileError("'{}': tensor '{}' holds a non-finite value", path, p + name);
      return Status::Ok();
    };
    FERRY_RETURN_IF_ERROR(get("ffn_gate_thresholds", {kFfnGridSteps + 1}, &L.thresholds));
    FERRY_RETURN_IF_ERROR(get("ffn_pred_a", {f.rank, f.dim}, &L.pred_a));
    FERRY_RETURN_IF_ERROR(get("ffn_pred_b", {f.ffn, f.rank}, &L.pred_b));
    FERRY_RETURN_IF_ERROR(get("ffn_pred_bias", {f.ffn}, &L.pred_bias));
    if (!std::is_sorted(L.thresholds.begin(), L.thresholds.end()))
      return CorruptFileError("'{}': tensor '{}ffn_gate_thresholds' is not ascending", path, p);
  }
  return f;
}

}  // namespace ferry
