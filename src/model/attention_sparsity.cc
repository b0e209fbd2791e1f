#include "model/attention_sparsity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "base/check.h"
#include "formats/weight_source.h"

namespace ferry {
namespace {

constexpr const char* kHowToMake =
    "write one with `ferry calibrate -m MODEL -f TEXT -o FILE` (on other text than you evaluate)";

// A copy of the rows [r0, r0 + n) of w, for each range in `ranges`, stacked: [sum n, n_in].
void AppendRows(const Linear& w, int64_t r0, int64_t n, std::vector<uint8_t>& dst) {
  const size_t row = RowBytes(w.type, w.n_in);
  const auto* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r0) * row;
  dst.insert(dst.end(), src, src + static_cast<size_t>(n) * row);
}

// A Linear owning a copy of `bytes` ([n_out, n_in] rows of type), packed when `pack`.
Linear OwnedLinear(DType type, int64_t n_out, int64_t n_in, const std::vector<uint8_t>& bytes, bool pack,
                   std::vector<std::shared_ptr<AlignedBuffer>>& owned, ThreadPool* pool) {
  auto buf = std::make_shared<AlignedBuffer>(std::max<size_t>(bytes.size(), 1));
  std::memcpy(buf->data(), bytes.data(), bytes.size());
  Linear lin{buf->data(), type, n_out, n_in, bytes.size(), nullptr, nullptr, 0.f};
  owned.push_back(std::move(buf));
  lin.MaybePack(pack, pool);
  return lin;
}

}  // namespace

StatusOr<std::vector<std::vector<float>>> LoadHeadImportance(const std::string& path, int32_t n_layers,
                                                             int32_t n_heads) {
  if (path.empty()) return InvalidArgumentError("--prune-heads needs --head-importance FILE: {}", kHowToMake);
  auto src = formats::OpenGguf(path);
  if (!src.ok())
    return InvalidArgumentError("--head-importance '{}': {} ({})", path, src.status().message(), kHowToMake);
  std::vector<std::vector<float>> imp(static_cast<size_t>(n_layers));
  for (int32_t l = 0; l < n_layers; ++l) {
    const std::string name = "blk." + std::to_string(l) + ".attn_heads.importance";
    const formats::TensorRef* t = (*src)->FindTensor(name);
    if (!t)
      return InvalidArgumentError("--head-importance '{}' has no tensor '{}' (an older or other file?): {}",
                                  path, name, kHowToMake);
    if (t->dtype != DType::kF32 || t->NumElements() != n_heads)
      return InvalidArgumentError("--head-importance '{}': '{}' is {} {}, the model has {} heads per layer",
                                  path, name, DTypeName(t->dtype), t->ShapeString(), n_heads);
    const auto* f = static_cast<const float*>(t->data);
    imp[static_cast<size_t>(l)].assign(f, f + n_heads);
  }
  if ((*src)->FindTensor("blk." + std::to_string(n_layers) + ".attn_heads.importance"))
    return InvalidArgumentError("--head-importance '{}' has more layers than the model's {}", path, n_layers);
  return imp;
}

std::vector<std::vector<int32_t>> SelectKeptHeads(const std::vector<std::vector<float>>& importance,
                                                  double fraction) {
  std::vector<std::vector<int32_t>> kept(importance.size());
  for (size_t l = 0; l < importance.size(); ++l) {
    const std::vector<float>& imp = importance[l];
    const int64_t n = static_cast<int64_t>(imp.size());
    const int64_t drop = std::min<int64_t>(
        std::max<int64_t>(n - 1, 0), std::llround(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(n)));
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return imp[a] < imp[b]; });
    kept[l].assign(order.begin() + drop, order.end());
    std::sort(kept[l].begin(), kept[l].end());
  }
  return kept;
}

StatusOr<std::unique_ptr<SparseAttention::PrunedLayer>> SparseAttention::BuildLayer(
    const ModelConfig& c, int32_t l, const AttentionWeightsRef& w, std::vector<int32_t> kept,
    ThreadPool* pool) const {
  const int64_t hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  for (const Linear* lin : {w.wq, w.wk, w.wv, w.wo})
    if (lin->IsW8A8() || !lin->data)
      return UnsupportedError(
          "--prune-heads: layer {} has W8A8 attention weights, which cannot be sliced yet", l);
  const DTypeTraits& tr = Traits(w.wo->type);
  if (IsFerryInt4(w.wo->type) ? (hd % FerryInt4Group(w.wo->type) != 0) : (hd % tr.block_size != 0))
    return UnsupportedError(
        "--prune-heads: layer {} attn_output.weight is {}, whose blocks straddle heads of head_dim {}; use a "
        "model with f32/f16/bf16 or head_dim-aligned blocks",
        l, DTypeName(w.wo->type), hd);
  auto p = std::make_unique<PrunedLayer>();
  p->kept = std::move(kept);
  for (int32_t h : p->kept) {
    const int32_t g = h / static_cast<int32_t>(group);
    p->head_kv.push_back(g);
    if (p->kept_kv.empty() || p->kept_kv.back() != g) p->kept_kv.push_back(g);
  }
  const int64_t kq = static_cast<int64_t>(p->kept.size()), kkv = static_cast<int64_t>(p->kept_kv.size());
  // q | k | v rows of the kept heads.
  std::vector<uint8_t> rows;
  for (int32_t h : p->kept) AppendRows(*w.wq, h * hd, hd, rows);
  for (int32_t g : p->kept_kv) AppendRows(*w.wk, g * hd, hd, rows);
  for (int32_t g : p->kept_kv) AppendRows(*w.wv, g * hd, hd, rows);
  const bool pack = w.wq->packed != nullptr || w.wo->packed != nullptr || !kernels::CanMatMul(w.wq->type);
  p->wqkv = OwnedLinear(w.wq->type, (kq + 2 * kkv) * hd, c.dim, rows, pack, p->owned, pool);
  if (!w.bq->empty()) {
    for (int32_t h : p->kept)
      p->bias.insert(p->bias.end(), w.bq->begin() + h * hd, w.bq->begin() + (h + 1) * hd);
    for (int32_t g : p->kept_kv)
      p->bias.insert(p->bias.end(), w.bk->begin() + g * hd, w.bk->begin() + (g + 1) * hd);
    for (int32_t g : p->kept_kv)
      p->bias.insert(p->bias.end(), w.bv->begin() + g * hd, w.bv->begin() + (g + 1) * hd);
  }
  // W_o: the kept heads' columns of every row.
  const size_t row = RowBytes(w.wo->type, w.wo->n_in), head_bytes = RowBytes(w.wo->type, hd);
  std::vector<uint8_t> cols;
  cols.reserve(static_cast<size_t>(c.dim) * static_cast<size_t>(kq) * head_bytes);
  for (int64_t r = 0; r < c.dim; ++r) {
    const auto* src = static_cast<const uint8_t*>(w.wo->data) + static_cast<size_t>(r) * row;
    for (int32_t h : p->kept) cols.insert(cols.end(), src + h * head_bytes, src + (h + 1) * head_bytes);
  }
  p->wo = OwnedLinear(w.wo->type, c.dim, kq * hd, cols, pack, p->owned, pool);
  return p;
}

Status SparseAttention::CheckRunOptions(const SparsityOptions& o) const {
  if (o.attn_skip_threshold < 0 || o.attn_skip_threshold >= 1)
    return InvalidArgumentError("--attn-skip-threshold {} must be in [0, 1)", o.attn_skip_threshold);
  if (!(o.attn_progressive_margin >= 0))
    return InvalidArgumentError("--attn-progressive-margin {} must be >= 0", o.attn_progressive_margin);
  const double fraction = o.UsesHeadPruning() ? o.prune_heads : 0;
  if (fraction != built_fraction_ || (fraction > 0 && o.head_importance != built_file_))
    return InvalidArgumentError(
        "--prune-heads {} (importance '{}') differs from the head pruning the model was loaded with ({}, "
        "'{}'): "
        "load the model with the pruning you want to run",
        fraction, o.head_importance, built_fraction_, built_file_);
  return Status::Ok();
}

Status SparseAttention::Configure(const SparsityOptions& o, const ModelConfig& c,
                                  const std::vector<AttentionWeightsRef>& layers) {
  if (o.attn_skip_threshold < 0 || o.attn_skip_threshold >= 1)
    return InvalidArgumentError("--attn-skip-threshold {} must be in [0, 1)", o.attn_skip_threshold);
  if (!(o.attn_progressive_margin >= 0))
    return InvalidArgumentError("--attn-progressive-margin {} must be >= 0", o.attn_progressive_margin);
  dense_bytes_.clear();
  for (const AttentionWeightsRef& w : layers)
    dense_bytes_.push_back(static_cast<int64_t>(w.wq->bytes + w.wk->bytes + w.wv->bytes + w.wo->bytes));
  if (!o.UsesHeadPruning()) {
    pruned_.clear();
    heads_pruned_ = kv_heads_pruned_ = 0;
    built_fraction_ = 0;
    return Status::Ok();
  }
  if (o.prune_heads >= 1) return InvalidArgumentError("--prune-heads {} must be in [0, 1)", o.prune_heads);
  if (o.kv_policy == KvPolicy::kH2O)
    return UnsupportedError(
        "--prune-heads with --kv-policy h2o is not supported (H2O scores sum over all heads)");
  if (built_fraction_ == o.prune_heads && built_file_ == o.head_importance) return Status::Ok();
  FERRY_ASSIGN_OR_RETURN(auto imp, LoadHeadImportance(o.head_importance, c.n_layers, c.n_heads));
  const std::vector<std::vector<int32_t>> kept = SelectKeptHeads(imp, o.prune_heads);
  std::vector<std::unique_ptr<PrunedLayer>> pruned(static_cast<size_t>(c.n_layers));
  int64_t heads = 0, kv_heads = 0;
  ThreadPool pool;  // repacks the sliced weights
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::vector<int32_t>& k = kept[static_cast<size_t>(l)];
    if (static_cast<int32_t>(k.size()) == c.n_heads) continue;
    FERRY_ASSIGN_OR_RETURN(pruned[static_cast<size_t>(l)],
                           BuildLayer(c, l, layers[static_cast<size_t>(l)], k, &pool));
    heads += c.n_heads - static_cast<int64_t>(k.size());
    kv_heads += c.n_kv_heads - static_cast<int64_t>(pruned[static_cast<size_t>(l)]->kept_kv.size());
  }
  pruned_ = std::move(pruned);
  heads_pruned_ = heads;
  kv_heads_pruned_ = kv_heads;
  built_fraction_ = o.prune_heads;
  built_file_ = o.head_importance;
  return Status::Ok();
}

Status SparseAttention::BeginForward(const SparsityOptions& o, KvCache& kv, SparsityStats* stats) const {
  if (o.attn_progressive) FERRY_RETURN_IF_ERROR(kv.EnableInt8Keys());
  if (!stats) return Status::Ok();
  stats->heads_pruned = heads_pruned_;
  stats->kv_heads_pruned = kv_heads_pruned_;
  return Status::Ok();
}

void SparseAttention::CopyKeyInt8(KvCache& kv, int32_t layer, int32_t seq, int32_t slot, const float* k,
                                  int n_kv_heads, int head_dim) {
  int8_t* k8 = kv.KeySlotInt8(layer, seq, slot);
  if (!k8) return;
  float* ks = kv.KeyScaleSlot(layer, seq, slot);
  for (int g = 0; g < n_kv_heads; ++g)
    ks[g] = kernels::QuantizeActInt8(k + int64_t{g} * head_dim, head_dim, 0.f, k8 + int64_t{g} * head_dim);
}

namespace {

void AddCounts(const kernels::AttentionSparseCounts& n, int head_dim, bool progressive, SparsityStats& s) {
  const int64_t row = int64_t{head_dim} * 4;
  s.attn_v_bytes += n.v_rows * row;
  s.attn_v_bytes_skipped += n.v_rows_skipped * row;
  s.attn_k_rows += n.k_rows;
  s.attn_k_rows_f32 += n.k_rows_f32;
  s.attn_k_bytes_dense += n.k_rows * row;
  // Progressive: every row is read in INT8 (head_dim bytes + a scale), recomputed rows in f32 too.
  s.attn_k_bytes_read += n.k_rows_f32 * row + (progressive ? n.k_rows * (head_dim + 4) : 0);
}

kernels::AttentionSparsity KernelOptions(const SparsityOptions& o) {
  kernels::AttentionSparsity sp;
  sp.skip_threshold = o.attn_skip_threshold;
  sp.progressive = o.attn_progressive;
  sp.progressive_margin = o.attn_progressive_margin;
  return sp;
}

}  // namespace

void SparseAttention::Attend(const SparsityOptions& o, const ModelConfig& c, const float* q, int n_q,
                             int n_heads, const int32_t* head_kv, const int32_t* slots,
                             const kernels::KvBlocks& kv, float* out, SparsityStats* stats, ThreadPool* pool,
                             const kernels::AttentionVariant& variant) const {
  const float scale = c.AttentionScale();
  const bool counted = o.attn_skip_threshold > 0 || o.attn_progressive;
  if (!head_kv && !counted) {
    kernels::Attention(q, n_q, slots, n_heads, c.n_kv_heads, c.head_dim, scale, kv, out, pool, variant);
    return;
  }
  // The sparse kernel has no windows, soft-capping or sinks: LlamaModel refuses sparse attention for
  // the architectures that use them.
  FERRY_CHECK(variant.window == 0 && variant.logit_softcap == 0.f && variant.sinks == nullptr);
  kernels::AttentionSparsity sp = KernelOptions(o);
  sp.head_kv = head_kv;
  kernels::AttentionSparseCounts n;
  kernels::AttentionSparse(q, n_q, slots, n_heads, c.n_kv_heads, c.head_dim, scale, kv, sp, out, &n, pool);
  if (counted && stats) AddCounts(n, c.head_dim, o.attn_progressive, *stats);
}

void SparseAttention::CountHeadWork(const ModelConfig& c, int32_t l, int64_t n_tok, int64_t sum_keys,
                                    SparsityStats& stats) const {
  const int64_t hd = c.head_dim, dim = c.dim;
  auto flops = [&](int64_t heads, int64_t kv_heads) {
    // q, k, v rows and W_o columns (2 FLOPs per MAC), then scores and the V sum per (query, head, key).
    return n_tok * 2 * dim * hd * (2 * heads + 2 * kv_heads) + sum_keys * heads * 4 * hd;
  };
  const int64_t dense = flops(c.n_heads, c.n_kv_heads);
  const int64_t dense_bytes = dense_bytes_[static_cast<size_t>(l)];
  stats.prune_flops += dense;
  stats.prune_weight_bytes += dense_bytes;
  const PrunedLayer* p = Pruned(l);
  if (!p) return;
  stats.prune_flops_skipped +=
      dense - flops(static_cast<int64_t>(p->kept.size()), static_cast<int64_t>(p->kept_kv.size()));
  stats.prune_weight_bytes_skipped += dense_bytes - static_cast<int64_t>(p->wqkv.bytes + p->wo.bytes);
}

}  // namespace ferry
