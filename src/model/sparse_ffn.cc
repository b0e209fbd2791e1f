#include "model/sparse_ffn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/kernels.h"

namespace ferry {
namespace {

// |SiLU(g)|, the quantity thresholds are calibrated on (quant/ffn_sparsify.cc computes the same).
inline float AbsSilu(float g) {
  return std::fabs(g / (1.0f + std::exp(-g)));
}

// The type of the transposed down copy: f32 and f16 stay as they are (exact), bf16 becomes
// f16; quantized types are requantized to q8_0 (blocks of 32 along dim) when dim allows, f32
// otherwise: a quantized block cannot be transposed without requantizing.
DType TransposedDownType(DType t, int64_t dim) {
  if (t == DType::kF32 || t == DType::kF16) return t;
  if (t == DType::kBF16) return DType::kF16;
  return dim % 32 == 0 ? DType::kQ8_0 : DType::kF32;
}

AlignedBuffer ToF16(const std::vector<float>& v) {
  AlignedBuffer b(RowBytes(DType::kF16, static_cast<int64_t>(v.size())));
  kernels::QuantizeRow(DType::kF16, v.data(), b.data(), static_cast<int64_t>(v.size()));
  return b;
}

// Scratch slots of the sparse FFN (model/scratch.h).
enum Slot : int { kGate, kUp, kH, kScores, kZ, kGk, kUk };
enum IntSlot : int { kKeep, kOrder };

}  // namespace

StatusOr<std::unique_ptr<SparseFfn>> SparseFfn::Create(const SparsityOptions& o, const ModelConfig& c,
                                                       const std::vector<FfnLinears>& layers,
                                                       ThreadPool* pool) {
  if (!(o.ffn_sparsity >= 0 && o.ffn_sparsity < 1))
    return InvalidArgumentError("--ffn-sparsity {} must be in [0, 1)", o.ffn_sparsity);
  if (!o.ffn_predictor.empty() && !o.ffn_stats.empty() && o.ffn_predictor != o.ffn_stats)
    return InvalidArgumentError(
        "pass either --ffn-stats FILE (threshold mode) or --ffn-predictor FILE (predictor mode), not both");
  auto ffn = std::make_unique<SparseFfn>();
  ffn->mode_ = o.ffn_predictor.empty() ? FfnSparsityMode::kThreshold : FfnSparsityMode::kPredictor;
  const std::string path = o.ffn_predictor.empty() ? o.ffn_stats : o.ffn_predictor;
  if (path.empty())
    return InvalidArgumentError(
        "--ffn-sparsity needs per-layer thresholds calibrated for this model: run `ferry sparsify -m MODEL "
        "--calib TEXT -o FILE` and pass --ffn-stats FILE (or --ffn-predictor FILE)");
  FERRY_ASSIGN_OR_RETURN(ffn->file_, LoadFfnSparsity(path));
  FERRY_RETURN_IF_ERROR(ffn->file_.CheckMatches(c, path));
  ffn->dim_ = c.dim;
  ffn->ffn_ = c.ffn_dim;
  ffn->rank_ = ffn->file_.rank;
  const int64_t dim = c.dim, n_ffn = c.ffn_dim;
  for (size_t l = 0; l < layers.size(); ++l) {
    const FfnLinears& w = layers[l];
    for (const Linear* lin : {w.gate, w.up})
      if (!lin->data || lin->IsW8A8() || !kernels::CanMatMul(lin->type))
        return UnsupportedError(
            "FFN sparsity needs gate/up weights the row kernels can read; layer {} has {}{}", l,
            DTypeName(lin->type), lin->IsW8A8() ? " (W8A8)" : "");
    if (!w.down->data || w.down->IsW8A8() || !kernels::CanDequantize(w.down->type))
      return UnsupportedError("FFN sparsity cannot transpose layer {}'s down projection of type {}", l,
                              DTypeName(w.down->type));
    Layer L;
    // Transposed down copy: down [dim, ffn] -> down_t [ffn, dim], one neuron per row.
    L.down_t_type = TransposedDownType(w.down->type, dim);
    std::vector<float> down(static_cast<size_t>(dim * n_ffn));  // [dim, ffn] dequantized
    const size_t in_row = RowBytes(w.down->type, n_ffn);
    for (int64_t d = 0; d < dim; ++d)
      kernels::DequantizeRow(w.down->type,
                             static_cast<const uint8_t*>(w.down->data) + static_cast<size_t>(d) * in_row,
                             down.data() + d * n_ffn, n_ffn);
    const size_t out_row = RowBytes(L.down_t_type, dim);
    L.down_t = AlignedBuffer(out_row * static_cast<size_t>(n_ffn));
    auto transpose = [&](int64_t j0, int64_t j1) {
      std::vector<float> col(static_cast<size_t>(dim));  // [dim] neuron j's output weights
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t d = 0; d < dim; ++d)
          col[static_cast<size_t>(d)] = down[static_cast<size_t>(d * n_ffn + j)];
        kernels::QuantizeRow(L.down_t_type, col.data(),
                             static_cast<uint8_t*>(L.down_t.data()) + static_cast<size_t>(j) * out_row, dim);
      }
    };
    if (pool) {
      pool->ParallelFor(n_ffn, transpose);
    } else {
      transpose(0, n_ffn);
    }
    if (ffn->mode_ == FfnSparsityMode::kPredictor) {
      FfnLayerSparsity& f = ffn->file_.layers[l];
      L.pred_a = ToF16(f.pred_a);
      L.pred_b = ToF16(f.pred_b);
      L.pred_bias = std::move(f.pred_bias);
      f.pred_a.clear();
      f.pred_b.clear();
    }
    ffn->layers_.push_back(std::move(L));
  }
  return ffn;
}

double SparseFfn::TargetSparsity(const SparsityOptions& o) const {
  if (mode_ == FfnSparsityMode::kPredictor && o.ffn_sparsity <= 0) return file_.train_sparsity;
  return o.ffn_sparsity;
}

size_t SparseFfn::ExtraBytes() const {
  size_t b = 0;
  for (const Layer& L : layers_)
    b += L.down_t.size() + L.pred_a.size() + L.pred_b.size() + L.pred_bias.size() * 4;
  return b;
}

void SparseFfn::PredictKeep(const Layer& L, const float* xn, int64_t n_keep, int32_t* keep, int64_t* n_kept,
                            Scratch& scratch) const {
  float* z = scratch.Floats(kZ, rank_);       // [rank]
  float* sc = scratch.Floats(kScores, ffn_);  // [ffn]
  kernels::MatMul(L.pred_a.data(), DType::kF16, rank_, dim_, xn, 1, z, nullptr);
  kernels::MatMul(L.pred_b.data(), DType::kF16, ffn_, rank_, z, 1, sc, nullptr);
  for (int64_t j = 0; j < ffn_; ++j)
    sc[j] = AbsSilu(sc[j] + L.pred_bias[static_cast<size_t>(j)]);  // |SiLU(g^)|
  int32_t* order = scratch.Ints(kOrder, ffn_);                     // [ffn]
  std::iota(order, order + ffn_, 0);
  // Highest scores first, ties by index: deterministic.
  auto better = [sc](int32_t a, int32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); };
  std::nth_element(order, order + n_keep - 1, order + ffn_, better);
  std::copy_n(order, n_keep, keep);
  std::sort(keep, keep + n_keep);  // ascending rows: forward reads
  *n_kept = n_keep;
}

void SparseFfn::Forward(int32_t layer, const FfnLinears& w, const SparsityOptions& o, const float* xn,
                        int64_t n, float* out, SparsityStats* stats, Scratch& scratch,
                        ThreadPool* pool) const {
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const int64_t dim = dim_, ffn = ffn_;
  const double s = TargetSparsity(o);
  const float thr = file_.layers[static_cast<size_t>(layer)].Threshold(s);
  const int64_t n_keep = std::clamp<int64_t>(std::llround((1.0 - s) * static_cast<double>(ffn)), 1, ffn);
  int32_t* keep = scratch.Ints(kKeep, ffn);  // [<= ffn] kept neurons of one token, ascending
  int64_t skipped = 0;
  // Row-sparse reads pay when the step's tokens together read less than the dense weights.
  const bool row_sparse = static_cast<double>(n) * (1.0 - s) < 1.0;
  if (row_sparse) {
    float* gate = scratch.Floats(kGate, n * ffn);  // [n, ffn] threshold mode: the full gate
    if (mode_ == FfnSparsityMode::kThreshold) w.gate->Apply(xn, n, gate, pool);
    float* gk = scratch.Floats(kGk, ffn);  // [n_kept] gate of the kept neurons
    float* uk = scratch.Floats(kUk, ffn);  // [n_kept] up of the kept neurons, then SiLU(gate) * up
    for (int64_t t = 0; t < n; ++t) {
      const float* x = xn + t * dim;
      int64_t k = 0;
      if (mode_ == FfnSparsityMode::kThreshold) {
        const float* g = gate + t * ffn;
        for (int64_t j = 0; j < ffn; ++j)
          if (AbsSilu(g[j]) >= thr) {
            gk[k] = g[j];
            keep[k++] = static_cast<int32_t>(j);
          }
      } else {
        PredictKeep(L, x, n_keep, keep, &k, scratch);
        kernels::MatVecRows(w.gate->data, w.gate->type, dim, keep, k, x, gk, pool);
      }
      kernels::MatVecRows(w.up->data, w.up->type, dim, keep, k, x, uk, pool);
      kernels::SiluMul(gk, uk, uk, k);
      kernels::AxpyRows(L.down_t.data(), L.down_t_type, dim, keep, uk, k, out + t * dim, pool);
      skipped += ffn - k;
    }
  } else {
    // Dense kernels, then the mask: what the row-sparse path computes, for many tokens at once.
    float* gate = scratch.Floats(kGate, n * ffn);  // [n, ffn]
    float* up = scratch.Floats(kUp, n * ffn);      // [n, ffn]
    if (w.gate_up->n_out > 0) {
      float* gu = scratch.Floats(kH, n * 2 * ffn);  // [n, 2 * ffn] gate | up per token
      w.gate_up->Apply(xn, n, gu, pool);
      for (int64_t t = 0; t < n; ++t) {
        std::copy_n(gu + t * 2 * ffn, ffn, gate + t * ffn);
        std::copy_n(gu + t * 2 * ffn + ffn, ffn, up + t * ffn);
      }
    } else {
      w.gate->Apply(xn, n, gate, pool);
      w.up->Apply(xn, n, up, pool);
    }
    float* h = scratch.Floats(kH, n * ffn);  // [n, ffn] SiLU(gate) * up, masked
    for (int64_t t = 0; t < n; ++t) {
      const float* g = gate + t * ffn;
      float* ht = h + t * ffn;
      kernels::SiluMul(g, up + t * ffn, ht, ffn);
      if (mode_ == FfnSparsityMode::kThreshold) {
        for (int64_t j = 0; j < ffn; ++j)
          if (!(AbsSilu(g[j]) >= thr)) {
            ht[j] = 0.f;
            ++skipped;
          }
      } else {
        int64_t k = 0;
        PredictKeep(L, xn + t * dim, n_keep, keep, &k, scratch);
        int64_t next = 0;
        for (int64_t j = 0; j < ffn; ++j) {
          if (next < k && keep[next] == j) {
            ++next;
          } else {
            ht[j] = 0.f;
          }
        }
        skipped += ffn - k;
      }
    }
    w.down->Apply(h, n, out, pool);
  }
  if (!stats) return;
  stats->ffn_tokens += n;
  stats->ffn_neurons += n * ffn;
  stats->ffn_skipped += skipped;
  if (row_sparse) stats->ffn_sparse_tokens += n;
}

}  // namespace ferry
