#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "kernels/kernels.h"
#include "model/linear.h"
#include "model/parallel.h"

namespace ferry {

void ExpertMatrix::Apply(const float* x, int64_t n_tok, float* y, ThreadPool* pool) const {
  if (packed) {
    kernels::MatMulPacked(packed.get(), type, n_out, n_in, x, n_tok, y, pool);
  } else {
    kernels::MatMul(data, type, n_out, n_in, x, n_tok, y, pool);
  }
}

TokenRoute RouteToken(const float* logits, int32_t n_expert, int32_t k, bool normalize,
                      bool softmax_after_topk) {
  // Softmax in double so the ranking of close experts does not depend on summation order.
  std::vector<double> p(static_cast<size_t>(n_expert));  // [n_expert]
  const float mx = *std::max_element(logits, logits + n_expert);
  double sum = 0;
  for (int32_t e = 0; e < n_expert; ++e) sum += p[static_cast<size_t>(e)] = std::exp(double{logits[e]} - mx);
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const double pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(b)];
    return pa != pb ? pa > pb : a < b;
  });
  TokenRoute r;
  double chosen = 0;
  for (int32_t i = 0; i < k; ++i) chosen += p[static_cast<size_t>(order[static_cast<size_t>(i)])];
  // A softmax over the chosen logits alone is theirs divided by their sum: exp(l - max) over
  // the k chosen (the max is the first's, so the common factor cancels).
  const double denom = normalize || softmax_after_topk ? chosen : sum;
  for (int32_t i = 0; i < k; ++i) {
    const int32_t e = order[static_cast<size_t>(i)];
    r.expert.push_back(e);
    r.weight.push_back(static_cast<float>(p[static_cast<size_t>(e)] / denom));
  }
  return r;
}

int64_t ExpertCapacity(int32_t k, double factor, int64_t n_tokens, int32_t n_expert) {
  if (factor <= 0) return std::numeric_limits<int64_t>::max();
  // Switch Transformer's capacity generalized to top-k. A tiny epsilon keeps exact products
  // (k * F * n / E integral in real numbers) from rounding up through float error.
  const double c =
      static_cast<double>(k) * factor * static_cast<double>(n_tokens) / static_cast<double>(n_expert);
  return static_cast<int64_t>(std::ceil(c - 1e-9));
}

namespace {

// The matrices a tensor holds, checked as every linear is (model/linear.cc): one [n_out, n_in]
// matrix, or a 3-D [n_expert, n_out, n_in] tensor split into n_expert contiguous slices.
StatusOr<std::vector<ExpertMatrix>> ReadMatrices(const formats::WeightSource& src, const std::string& name,
                                                 int64_t n_mats, int64_t n_out, int64_t n_in) {
  std::vector<Linear> lins;
  if (n_mats > 1) {
    FERRY_ASSIGN_OR_RETURN(lins, LoadLinearStack(src, name, n_mats, n_out, n_in));
  } else {
    FERRY_ASSIGN_OR_RETURN(Linear lin, LoadLinear(src, name, n_out, n_in));
    if (lin.IsW8A8())
      return UnsupportedError("'{}': tensor '{}' is W8A8 int8; Ferry's MoE layers take no W8A8 matrices",
                              src.path(), name);
    lins.push_back(lin);
  }
  std::vector<ExpertMatrix> out;
  for (const Linear& l : lins) out.push_back(ExpertMatrix{l.data, l.type, l.n_out, l.n_in, l.bytes, nullptr});
  return out;
}

// Repacks mats (the same projection of a layer's experts: one type and shape) into one buffer.
// Fine-grained experts are small (DeepSeek-V2-Lite's 1.6 MB at q4_0): a buffer each would miss
// AlignedBuffer's 2 MiB huge pages, and decode would stream them through 4 KiB pages (a TLB
// walk every 4 KiB): deepseek-v2-lite q4_0 decoded 7.0 tok/s so, 23 in one buffer (Zen 5, 2 threads).
void PackExperts(const std::vector<ExpertMatrix*>& mats, bool repack, ThreadPool* pool) {
  if (mats.empty()) return;
  const ExpertMatrix& first = *mats[0];
  for (const ExpertMatrix* m : mats)  // per-expert tensors of a file may differ: one buffer each
    if (m->type != first.type || m->n_out != first.n_out || m->n_in != first.n_in) {
      for (ExpertMatrix* one : mats) PackExperts({one}, repack, pool);
      return;
    }
  if (!kernels::CanPack(first.type, first.n_in)) return;
  if (!repack && kernels::CanMatMul(first.type)) return;
  const size_t each = kernels::PackedBytes(first.type, first.n_out, first.n_in);
  auto buf = std::make_shared<AlignedBuffer>(each * mats.size());  // [experts, PackedBytes]
  for (size_t e = 0; e < mats.size(); ++e) {
    ExpertMatrix& m = *mats[e];
    uint8_t* at = buf->as<uint8_t>() + e * each;
    kernels::PackWeights(m.type, m.data, m.n_out, m.n_in, at, pool);
    m.packed = std::shared_ptr<const uint8_t>(buf, at);  // shares ownership of the whole buffer
  }
}

// Scratch slots of the MoE FFN (model/scratch.h).
enum Slot : int { kLogits, kGathered, kGate, kUp, kExpertOut, kSlotOut };
enum ByteSlot : int { kKept };

}  // namespace

StatusOr<std::unique_ptr<MoeFfn>> MoeFfn::Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                               int32_t layer, bool repack, ThreadPool* pack_pool,
                                               const ExpertSplit& split) {
  auto m = std::make_unique<MoeFfn>();
  m->n_expert_ = cfg.n_expert;
  m->k_ = cfg.n_expert_used;
  m->dim_ = cfg.dim;
  m->ffn_ = cfg.expert_ffn_dim;
  m->shared_ffn_ = cfg.shared_expert_ffn_dim;
  m->normalize_ = cfg.expert_weights_norm;
  m->weight_scale_ = cfg.expert_weights_scale;
  m->softmax_after_topk_ = cfg.expert_softmax_after_topk;
  m->swiglu_oai_ = cfg.swiglu_oai;
  const std::string p = "blk." + std::to_string(layer) + ".";
  // DeepSeek-V3's selection bias changes which experts are chosen: refused, not ignored.
  if (src.FindTensor(p + "exp_probs_b.bias"))
    return UnsupportedError(
        "'{}': '{}exp_probs_b.bias' (DeepSeek-V3's expert selection bias) is not supported yet", src.path(),
        p);
  const int64_t E = cfg.n_expert, dim = cfg.dim, ffn = cfg.expert_ffn_dim;
  FERRY_ASSIGN_OR_RETURN(auto router, ReadMatrices(src, p + "ffn_gate_inp.weight", 1, E, dim));
  m->router_ = router[0];
  // gpt-oss's biases as f32 vectors: router [E], gate/up [E, ffn], down [E, dim].
  auto read_bias = [&](const std::string& name, int64_t n, std::vector<float>* out) -> Status {
    const formats::TensorRef* t = src.FindTensor(name);
    if (!t) return Status::Ok();
    if (t->NumElements() != n || !kernels::CanDequantize(t->dtype) || !RowBytesChecked(t->dtype, n))
      return InvalidArgumentError("'{}': tensor '{}' has shape {} / type {}, expected {} elements",
                                  src.path(), name, t->ShapeString(), DTypeName(t->dtype), n);
    out->resize(static_cast<size_t>(n));
    kernels::DequantizeRow(t->dtype, t->data, out->data(), n);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(read_bias(p + "ffn_gate_inp.bias", E, &m->router_bias_));
  FERRY_RETURN_IF_ERROR(read_bias(p + "ffn_gate_exps.bias", E * ffn, &m->gate_bias_));
  FERRY_RETURN_IF_ERROR(read_bias(p + "ffn_up_exps.bias", E * ffn, &m->up_bias_));
  FERRY_RETURN_IF_ERROR(read_bias(p + "ffn_down_exps.bias", E * dim, &m->down_bias_));
  m->experts_.resize(static_cast<size_t>(E));
  if (src.FindTensor(p + "ffn_gate_exps.weight")) {
    FERRY_ASSIGN_OR_RETURN(auto gate, ReadMatrices(src, p + "ffn_gate_exps.weight", E, ffn, dim));
    FERRY_ASSIGN_OR_RETURN(auto up, ReadMatrices(src, p + "ffn_up_exps.weight", E, ffn, dim));
    FERRY_ASSIGN_OR_RETURN(auto down, ReadMatrices(src, p + "ffn_down_exps.weight", E, dim, ffn));
    for (size_t e = 0; e < static_cast<size_t>(E); ++e) {
      Expert& x = m->experts_[e] = Expert{gate[e], up[e], down[e]};
      if (!m->gate_bias_.empty()) x.gate_bias = m->gate_bias_.data() + e * static_cast<size_t>(ffn);
      if (!m->up_bias_.empty()) x.up_bias = m->up_bias_.data() + e * static_cast<size_t>(ffn);
      if (!m->down_bias_.empty()) x.down_bias = m->down_bias_.data() + e * static_cast<size_t>(dim);
    }
  } else if (src.FindTensor(p + "ffn_gate.0.weight")) {  // older Mixtral GGUFs: one tensor per expert
    for (int64_t e = 0; e < E; ++e) {
      auto name = [&](const char* base) {  // blk.L.ffn_gate.E.weight (appends: GCC 12 -Wrestrict)
        std::string s = p;
        s.append(base).append(".").append(std::to_string(e)).append(".weight");
        return s;
      };
      FERRY_ASSIGN_OR_RETURN(auto gate, ReadMatrices(src, name("ffn_gate"), 1, ffn, dim));
      FERRY_ASSIGN_OR_RETURN(auto up, ReadMatrices(src, name("ffn_up"), 1, ffn, dim));
      FERRY_ASSIGN_OR_RETURN(auto down, ReadMatrices(src, name("ffn_down"), 1, dim, ffn));
      m->experts_[static_cast<size_t>(e)] = Expert{gate[0], up[0], down[0]};
    }
  } else {
    return NotFoundError(
        "'{}': layer {} has a router ('{}ffn_gate_inp.weight') but no expert tensors "
        "('{}ffn_gate_exps.weight')",
        src.path(), layer, p, p);
  }
  if (m->shared_ffn_ > 0) {
    const int64_t sh = m->shared_ffn_;
    FERRY_ASSIGN_OR_RETURN(auto gate, ReadMatrices(src, p + "ffn_gate_shexp.weight", 1, sh, dim));
    FERRY_ASSIGN_OR_RETURN(auto up, ReadMatrices(src, p + "ffn_up_shexp.weight", 1, sh, dim));
    FERRY_ASSIGN_OR_RETURN(auto down, ReadMatrices(src, p + "ffn_down_shexp.weight", 1, dim, sh));
    m->shared_ = Expert{gate[0], up[0], down[0]};
    // The shared expert's output is scaled by sigmoid(w . x) when the file has the gate.
    if (const formats::TensorRef* g = src.FindTensor(p + "ffn_gate_inp_shexp.weight")) {
      if (g->NumElements() != dim || !kernels::CanDequantize(g->dtype) || !RowBytesChecked(g->dtype, dim))
        return InvalidArgumentError(
            "'{}': tensor '{}ffn_gate_inp_shexp.weight' has shape {} / type {}, expected [{}]", src.path(), p,
            g->ShapeString(), DTypeName(g->dtype), dim);
      m->shared_gate_.resize(static_cast<size_t>(dim));
      kernels::DequantizeRow(g->dtype, g->data, m->shared_gate_.data(), dim);
    }
  }
  if (split.size > 1) FERRY_RETURN_IF_ERROR(m->Split(src, layer, split));
  for (ExpertMatrix Expert::*proj : {&Expert::gate, &Expert::up, &Expert::down}) {
    std::vector<ExpertMatrix*> mats;
    for (Expert& e : m->experts_) mats.push_back(&(e.*proj));
    PackExperts(mats, repack, pack_pool);
    if (m->shared_ffn_ > 0) PackExperts({&(m->shared_.*proj)}, repack, pack_pool);
  }
  return m;
}

Status MoeFfn::Split(const formats::WeightSource& src, int32_t layer, const ExpertSplit& split) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  // One projection's rows [r0, r0 + n) of every matrix: views into the same bytes.
  auto rows = [](ExpertMatrix& w, int64_t r0, int64_t n) {
    const size_t row = RowBytes(w.type, w.n_in);
    w.data = static_cast<const uint8_t*>(w.data) + row * static_cast<size_t>(r0);
    w.n_out = n;
    w.bytes = row * static_cast<size_t>(n);
  };
  // Columns [c0, c0 + n) of each of `mats` (a layer's experts, or the shared one), copied into
  // one buffer so that the experts stay together in memory.
  auto columns = [&](const std::vector<ExpertMatrix*>& mats, int64_t c0, int64_t n,
                     const std::string& name) -> Status {
    size_t total = 0;
    for (const ExpertMatrix* w : mats) {
      FERRY_RETURN_IF_ERROR(CheckColumnSlice(w->type, w->n_in, c0, n, src.path() + ": " + name));
      total += RowBytes(w->type, n) * static_cast<size_t>(w->n_out);
    }
    auto buf = std::make_shared<AlignedBuffer>(total);  // [mats, n_out, n columns]
    uint8_t* at = buf->as<uint8_t>();
    for (ExpertMatrix* w : mats) {
      CopyColumns(w->data, w->type, w->n_out, w->n_in, c0, n, at);
      w->data = at;
      w->n_in = n;
      w->bytes = RowBytes(w->type, n) * static_cast<size_t>(w->n_out);
      at += w->bytes;
    }
    slices_.push_back(std::move(buf));
    return Status::Ok();
  };
  auto share = [&](int64_t width, const char* what) -> StatusOr<int64_t> {
    if (width % split.size != 0)
      return InvalidArgumentError(
          "'{}': --tensor-parallel {}: the {} width {} of layer {} does not divide by it", src.path(),
          split.size, what, width, layer);
    return width / split.size;
  };
  FERRY_ASSIGN_OR_RETURN(const int64_t n, share(ffn_, "experts'"));
  const int64_t f0 = split.rank * n;
  std::vector<ExpertMatrix*> downs;
  for (Expert& e : experts_) {
    rows(e.gate, f0, n);
    rows(e.up, f0, n);
    downs.push_back(&e.down);
    if (e.gate_bias) e.gate_bias += f0;
    if (e.up_bias) e.up_bias += f0;
    if (split.rank != 0) e.down_bias = nullptr;
  }
  FERRY_RETURN_IF_ERROR(columns(downs, f0, n, p + "ffn_down_exps.weight"));
  ffn_ = static_cast<int32_t>(n);
  if (shared_ffn_ > 0) {
    FERRY_ASSIGN_OR_RETURN(const int64_t sn, share(shared_ffn_, "shared expert's"));
    rows(shared_.gate, split.rank * sn, sn);
    rows(shared_.up, split.rank * sn, sn);
    FERRY_RETURN_IF_ERROR(columns({&shared_.down}, split.rank * sn, sn, p + "ffn_down_shexp.weight"));
    shared_ffn_ = static_cast<int32_t>(sn);
  }
  return Status::Ok();
}

size_t MoeFfn::TotalBytes() const {
  size_t b = router_.bytes;
  for (const Expert& e : experts_) b += e.gate.bytes + e.up.bytes + e.down.bytes;
  if (shared_ffn_ > 0) b += shared_.gate.bytes + shared_.up.bytes + shared_.down.bytes;
  return b;
}

size_t MoeFfn::ActiveBytesPerToken() const {
  const size_t shared = shared_ffn_ > 0 ? shared_.gate.bytes + shared_.up.bytes + shared_.down.bytes : 0;
  const size_t experts = TotalBytes() - router_.bytes - shared;
  return router_.bytes + shared + experts / static_cast<size_t>(n_expert_) * static_cast<size_t>(k_);
}

void MoeFfn::RunExpert(const Expert& e, const float* x, int64_t m, float* out, Scratch& scratch,
                       ThreadPool* pool) const {
  const int64_t ffn = e.gate.n_out;
  float* gate = scratch.Floats(kGate, m * ffn);  // [m, ffn]
  float* up = scratch.Floats(kUp, m * ffn);      // [m, ffn]
  e.gate.Apply(x, m, gate, pool);
  e.up.Apply(x, m, up, pool);
  for (int64_t i = 0; i < m && e.gate_bias; ++i) kernels::AddInPlace(gate + i * ffn, e.gate_bias, ffn);
  for (int64_t i = 0; i < m && e.up_bias; ++i) kernels::AddInPlace(up + i * ffn, e.up_bias, ffn);
  if (swiglu_oai_) {
    kernels::SwigluOaiMul(gate, up, gate, m * ffn);
  } else {
    kernels::SiluMul(gate, up, gate, m * ffn);
  }
  e.down.Apply(gate, m, out, pool);
  const int64_t dim = e.down.n_out;
  for (int64_t i = 0; i < m && e.down_bias; ++i) kernels::AddInPlace(out + i * dim, e.down_bias, dim);
}

void MoeFfn::Forward(const float* xn, int64_t n, float* out, double capacity_factor, SparsityStats* stats,
                     Scratch& scratch, ThreadPool* pool) const {
  const int64_t dim = dim_, k = k_;
  float* logits = scratch.Floats(kLogits, n * n_expert_);  // [n, n_expert]
  router_.Apply(xn, n, logits, pool);
  for (int64_t t = 0; t < n && !router_bias_.empty(); ++t)
    kernels::AddInPlace(logits + t * n_expert_, router_bias_.data(), n_expert_);
  std::vector<TokenRoute> routes(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    routes[static_cast<size_t>(t)] =
        RouteToken(logits + t * n_expert_, n_expert_, k_, normalize_, softmax_after_topk_);
  if (weight_scale_ != 0.0f && weight_scale_ != 1.0f)  // deepseek2's routed_scaling_factor, after any norm
    for (TokenRoute& r : routes)
      for (float& w : r.weight) w *= weight_scale_;

  // Assignments grouped by expert in token order: (token, rank within the token's top-k).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> by_expert(static_cast<size_t>(n_expert_));
  for (int64_t t = 0; t < n; ++t)
    for (int32_t r = 0; r < k_; ++r)
      by_expert[static_cast<size_t>(routes[static_cast<size_t>(t)].expert[static_cast<size_t>(r)])]
          .emplace_back(static_cast<int32_t>(t), r);
  const int64_t capacity = ExpertCapacity(k_, capacity_factor, n, n_expert_);
  if (stats) {
    stats->expert_load.resize(static_cast<size_t>(n_expert_), 0);
    stats->expert_dropped.resize(static_cast<size_t>(n_expert_), 0);
  }

  float* slot_out = scratch.Floats(kSlotOut, n * k * dim);  // [n, k, dim]
  uint8_t* kept = scratch.Bytes(kKept, n * k);              // [n, k] 1 = the assignment was computed
  std::fill(kept, kept + n * k, uint8_t{0});
  for (int32_t e = 0; e < n_expert_; ++e) {
    auto& list = by_expert[static_cast<size_t>(e)];
    const int64_t assigned = static_cast<int64_t>(list.size());
    const int64_t m = std::min(assigned, capacity);  // the first `capacity` tokens keep this expert
    if (stats) {
      stats->expert_load[static_cast<size_t>(e)] += assigned;
      stats->expert_dropped[static_cast<size_t>(e)] += assigned - m;
      stats->moe_assignments += assigned;
      stats->moe_dropped += assigned - m;
    }
    if (m == 0) continue;
    float* gathered = scratch.Floats(kGathered, m * dim);  // [m, dim]
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(xn + static_cast<int64_t>(list[static_cast<size_t>(i)].first) * dim, dim,
                  gathered + i * dim);
    float* y = scratch.Floats(kExpertOut, m * dim);  // [m, dim]
    RunExpert(experts_[static_cast<size_t>(e)], gathered, m, y, scratch, pool);
    for (int64_t i = 0; i < m; ++i) {
      const auto [t, r] = list[static_cast<size_t>(i)];
      std::copy_n(y + i * dim, dim, slot_out + (static_cast<int64_t>(t) * k + r) * dim);
      kept[static_cast<size_t>(int64_t{t} * k + r)] = 1;
    }
  }
  // Mix each token's experts in rank order (a fixed order per token: batch-invariant).
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * dim;
    std::fill(o, o + dim, 0.0f);
    const TokenRoute& route = routes[static_cast<size_t>(t)];
    for (int64_t r = 0; r < k; ++r) {
      if (!kept[static_cast<size_t>(t * k + r)]) continue;
      const float w = route.weight[static_cast<size_t>(r)];
      const float* y = slot_out + (t * k + r) * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] += w * y[d];
    }
  }
  if (shared_ffn_ > 0) {
    float* y = scratch.Floats(kExpertOut, n * dim);  // [n, dim]
    RunExpert(shared_, xn, n, y, scratch, pool);
    for (int64_t t = 0; t < n; ++t) {
      float g = 1.0f;
      if (!shared_gate_.empty()) {
        double dot = 0;
        for (int64_t d = 0; d < dim; ++d)
          dot += double{shared_gate_[static_cast<size_t>(d)]} * xn[t * dim + d];
        g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
      }
      for (int64_t d = 0; d < dim; ++d) out[t * dim + d] += g * y[t * dim + d];
    }
  }
}

}  // namespace ferry
