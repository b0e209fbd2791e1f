// LlamaModel::Load: reads and checks the weights by llama.cpp tensor name, shards them over
// the tensor-parallel ranks, packs them, and builds the RoPE angle tables.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/llama.h"
#include "model/llama_model.h"

namespace ferry {
namespace llama_internal {
namespace {

// Reads weights by llama.cpp name, checking shapes and types; every message names the tensor.
class WeightReader {
 public:
  WeightReader(const formats::WeightSource& src) : src_(src) {}

  StatusOr<Linear> Matrix(const std::string& name, int64_t n_out, int64_t n_in) const {
    return LoadLinear(src_, name, n_out, n_in);  // model/linear.cc
  }

  // Small vectors (norms, biases) are converted to f32 once at load.
  StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) const {
    const formats::TensorRef* t = src_.FindTensor(name);
    if (!t) return NotFoundError("'{}': tensor '{}' is missing", src_.path(), name);
    if (t->NumElements() != n)
      return InvalidArgumentError("'{}': tensor '{}' has shape {}, expected [{}]", src_.path(), name,
                                  t->ShapeString(), n);
    if (!kernels::CanDequantize(t->dtype) || !RowBytesChecked(t->dtype, n))
      return UnsupportedError("'{}': tensor '{}' has unsupported type {}", src_.path(), name,
                              DTypeName(t->dtype));
    std::vector<float> out(static_cast<size_t>(n));
    kernels::DequantizeRow(t->dtype, t->data, out.data(), n);
    return out;
  }

  bool Has(const std::string& name) const { return src_.FindTensor(name) != nullptr; }

 private:
  const formats::WeightSource& src_;
};

// deepseek2's MLA projections of one layer (llama.cpp's names; the converter's split attn_k_b
// and attn_v_b, one [rows, columns] matrix per head).
Status LoadMla(const WeightReader& r, const formats::WeightSource& src, const ModelConfig& c,
               const std::string& p, LayerWeights& w) {
  const int64_t dim = c.dim, nh = c.n_heads, rank = c.kv_lora_rank, qd = nh * c.mla_k_dim;
  if (c.q_lora_rank > 0) {
    FERRY_ASSIGN_OR_RETURN(w.wq_a, r.Matrix(p + "attn_q_a.weight", c.q_lora_rank, dim));
    FERRY_ASSIGN_OR_RETURN(w.q_a_norm, r.Vector(p + "attn_q_a_norm.weight", c.q_lora_rank));
    FERRY_ASSIGN_OR_RETURN(w.wq_b, r.Matrix(p + "attn_q_b.weight", qd, c.q_lora_rank));
  } else {
    FERRY_ASSIGN_OR_RETURN(w.wq, r.Matrix(p + "attn_q.weight", qd, dim));
  }
  FERRY_ASSIGN_OR_RETURN(w.wkv_a, r.Matrix(p + "attn_kv_a_mqa.weight", rank + c.rot_dim, dim));
  FERRY_ASSIGN_OR_RETURN(w.kv_a_norm, r.Vector(p + "attn_kv_a_norm.weight", rank));
  if (!r.Has(p + "attn_k_b.weight") && r.Has(p + "attn_kv_b.weight"))
    return UnsupportedError(
        "'{}': '{}attn_kv_b.weight' is the unsplit MLA projection of an old conversion; convert the model "
        "again "
        "with a current convert_hf_to_gguf.py (it writes attn_k_b and attn_v_b)",
        src.path(), p);
  FERRY_ASSIGN_OR_RETURN(w.wk_b, LoadLinearStack(src, p + "attn_k_b.weight", nh, rank, c.MlaNopeDim()));
  FERRY_ASSIGN_OR_RETURN(w.wv_b, LoadLinearStack(src, p + "attn_v_b.weight", nh, c.mla_v_dim, rank));
  FERRY_ASSIGN_OR_RETURN(w.wo, r.Matrix(p + "attn_output.weight", dim, nh * c.mla_v_dim));
  return Status::Ok();
}

// MLA's share: the rank's query heads (q_b rows, W_UK^T / W_UV of those heads, W_o's columns
// of their values); the latent projection (kv_a) and its norm stay whole, so every rank
// computes and caches the same latent rows, as a replicated KV head.
void ShardMlaAttention(LayerWeights& w, const TensorShard& s, const ModelConfig& c) {
  Linear& q = w.wq_b.data ? w.wq_b : w.wq;  // [n_heads mla_k_dim, q_lora or dim]
  q = SliceRows(q, s.q_head0 * c.mla_k_dim, s.n_q * c.mla_k_dim);
  auto heads = [&](std::vector<Linear>& v) {
    v = std::vector<Linear>(v.begin() + s.q_head0, v.begin() + s.q_head0 + s.n_q);
  };
  heads(w.wk_b);
  heads(w.wv_b);
}

// Keeps this tensor rank's share of a dense layer (model/parallel.h): q/k/v and gate/up by
// output rows (views), W_o and down by input columns (copies), biases by rows. Before packing.
Status ShardLayer(LayerWeights& w, const TensorShard& s, const ModelConfig& c, const std::string& prefix,
                  std::vector<std::shared_ptr<AlignedBuffer>>& keep) {
  const int64_t hd = c.head_dim, vd = c.IsMla() ? c.mla_v_dim : c.head_dim;  // W_o's columns per head
  if (c.IsMla()) {
    ShardMlaAttention(w, s, c);
  } else {
    w.wq = SliceRows(w.wq, s.q_head0 * hd, s.n_q * hd);
    w.wk = SliceRows(w.wk, s.kv_head0 * hd, s.n_kv * hd);
    w.wv = SliceRows(w.wv, s.kv_head0 * hd, s.n_kv * hd);
  }
  FERRY_ASSIGN_OR_RETURN(w.wo,
                         SliceColumns(w.wo, s.q_head0 * vd, s.n_q * vd, prefix + "attn_output.weight", keep));
  if (!w.moe) {  // MoE layers split their experts as they load (MoeFfn::Load)
    w.w_gate = SliceRows(w.w_gate, s.ffn0, s.n_ffn);
    w.w_up = SliceRows(w.w_up, s.ffn0, s.n_ffn);
    FERRY_ASSIGN_OR_RETURN(w.w_down,
                           SliceColumns(w.w_down, s.ffn0, s.n_ffn, prefix + "ffn_down.weight", keep));
  }
  auto rows = [](std::vector<float>& v, int64_t first, int64_t n) {
    if (!v.empty()) v = std::vector<float>(v.begin() + first, v.begin() + first + n);
  };
  rows(w.bq, s.q_head0 * hd, s.n_q * hd);
  rows(w.bk, s.kv_head0 * hd, s.n_kv * hd);
  rows(w.bv, s.kv_head0 * hd, s.n_kv * hd);
  rows(w.sinks, s.q_head0, s.n_q);  // gpt-oss: one sink logit per query head
  // W_o's output is a partial sum reduced over the ranks: its bias is added by the first only.
  if (s.q_head0 != 0) w.bo.clear();
  return Status::Ok();
}

// q, k, v projections (and biases when present) of one layer: attn_q/attn_k/attn_v, or the
// stacked attn_qkv.weight ([q_dim + 2 kv_dim, dim], q rows then k then v: llama.cpp's
// create_tensor_qkv, Phi-3's qkv_proj) split into row views, so everything after loading
// (sharding, packing, StackRows, head pruning) sees the three matrices either way.
Status LoadQkv(const WeightReader& r, const std::string& p, int64_t q_dim, int64_t kv_dim, int64_t dim,
               LayerWeights& w) {
  if (r.Has(p + "attn_qkv.weight")) {
    FERRY_ASSIGN_OR_RETURN(Linear qkv, r.Matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, dim));
    w.wq = SliceRows(qkv, 0, q_dim);
    w.wk = SliceRows(qkv, q_dim, kv_dim);
    w.wv = SliceRows(qkv, q_dim + kv_dim, kv_dim);
    if (r.Has(p + "attn_qkv.bias")) {
      FERRY_ASSIGN_OR_RETURN(std::vector<float> b, r.Vector(p + "attn_qkv.bias", q_dim + 2 * kv_dim));
      w.bq.assign(b.begin(), b.begin() + q_dim);
      w.bk.assign(b.begin() + q_dim, b.begin() + q_dim + kv_dim);
      w.bv.assign(b.begin() + q_dim + kv_dim, b.end());
    }
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(w.wq, r.Matrix(p + "attn_q.weight", q_dim, dim));
  FERRY_ASSIGN_OR_RETURN(w.wk, r.Matrix(p + "attn_k.weight", kv_dim, dim));
  FERRY_ASSIGN_OR_RETURN(w.wv, r.Matrix(p + "attn_v.weight", kv_dim, dim));
  if (r.Has(p + "attn_q.bias")) {
    FERRY_ASSIGN_OR_RETURN(w.bq, r.Vector(p + "attn_q.bias", q_dim));
    FERRY_ASSIGN_OR_RETURN(w.bk, r.Vector(p + "attn_k.bias", kv_dim));
    FERRY_ASSIGN_OR_RETURN(w.bv, r.Vector(p + "attn_v.bias", kv_dim));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> LlamaModel::Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                                  const ModelOptions& options) {
  // A norm over the whole q projection needs every head: pruned heads would change it.
  if (cfg.qk_norm_whole && options.sparsity.UsesHeadPruning())
    return UnsupportedError("'{}': head pruning is not supported for {} (its q/k norm spans all heads)",
                            src.path(), cfg.arch);
  // The contextual-sparse FFN and the MoE FFN compute SwiGLU only.
  if (cfg.gelu_ffn && options.sparsity.UsesFfnSparsity())
    return UnsupportedError("'{}': FFN sparsity is not supported for {} (GeGLU FFN)", src.path(), cfg.arch);
  auto m = std::make_unique<LlamaModel>();
  m->config_ = cfg;
  m->sparsity_ = options.sparsity;
  m->exact_gelu_ = options.exact_gelu;
  const ParallelLayout& par = options.parallel;
  m->par_ = par;
  if (par.Split() && !options.sparsity.OnlyMoeCapacity())
    return UnsupportedError(
        "sparsity options cannot be combined with --tensor-parallel / --pipeline-parallel");
  // Each rank holds some heads; a norm over the whole projection would need a reduction first.
  if (par.tp_size() > 1 && cfg.qk_norm_whole)
    return UnsupportedError("'{}': --tensor-parallel is not supported for {} (its q/k norm spans all heads)",
                            src.path(), cfg.arch);
  // MLA's latent row is shared by all heads (split by heads, the latent replicated); deepseek2
  // runs exact.
  if (cfg.IsMla() && !options.sparsity.OnlyMoeCapacity())
    return UnsupportedError("'{}': {} (multi-head latent attention) runs without sparsity options",
                            src.path(), cfg.arch);
  if (par.pp_size() > cfg.n_layers)
    return InvalidArgumentError("--pipeline-parallel {}: the model has only {} layers", par.pp_size(),
                                cfg.n_layers);
  FERRY_ASSIGN_OR_RETURN(m->shard_, PlanTensorShard(cfg, par.tp_rank(), par.tp_size()));
  for (int r = 0; r < par.tp_size(); ++r)
    m->vocab_split_.push_back(PlanTensorShard(cfg, r, par.tp_size())->vocab0);
  m->vocab_split_.push_back(cfg.n_vocab);
  m->stage_ = PlanStageLayers(cfg.n_layers, par.pp_rank(), par.pp_size());
  const bool last_stage = par.pp_rank() == par.pp_size() - 1;
  WeightReader r(src);
  const int64_t dim = cfg.dim, q_dim = int64_t{cfg.n_heads} * cfg.head_dim,
                kv_dim = int64_t{cfg.n_kv_heads} * cfg.head_dim, ffn = cfg.ffn_dim;
  FERRY_ASSIGN_OR_RETURN(m->token_embd_, r.Matrix("token_embd.weight", cfg.n_vocab, dim));
  if (!kernels::CanDequantize(m->token_embd_.type))
    return UnsupportedError("'{}': token_embd.weight type {} cannot be read", src.path(),
                            DTypeName(m->token_embd_.type));
  if (r.Has("output.weight")) {
    FERRY_ASSIGN_OR_RETURN(m->output_, r.Matrix("output.weight", cfg.n_vocab, dim));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  FERRY_ASSIGN_OR_RETURN(m->output_norm_, r.Vector("output_norm.weight", dim));
  if (last_stage) {  // the head's rows of this rank's share of the vocabulary
    m->output_ = SliceRows(m->output_, m->shard_.vocab0, m->shard_.n_vocab);
  } else {
    m->output_ = Linear{};  // other stages never compute logits
  }
  m->weight_bytes_ = m->output_.bytes;
  ThreadPool pack_pool;  // repacking at load: one pass over the weights on every core
  m->output_.MaybePack(options.repack_weights, &pack_pool);  // token_embd_ stays in place for row lookups
  for (int32_t l = 0; l < cfg.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights w;
    if (l < m->stage_.first || l >= m->stage_.last) {  // another pipeline stage's layer
      m->layers_.push_back(std::move(w));
      continue;
    }
    if (cfg.pre_norms) {  // gpt-oss names its FFN input norm post_attention_norm
      FERRY_ASSIGN_OR_RETURN(w.attn_norm, r.Vector(p + "attn_norm.weight", dim));
      FERRY_ASSIGN_OR_RETURN(
          w.ffn_norm, r.Vector(p + (cfg.swiglu_oai ? "post_attention_norm.weight" : "ffn_norm.weight"), dim));
    }
    if (cfg.post_norms) {
      FERRY_ASSIGN_OR_RETURN(w.attn_post_norm, r.Vector(p + "post_attention_norm.weight", dim));
      FERRY_ASSIGN_OR_RETURN(w.ffn_post_norm, r.Vector(p + "post_ffw_norm.weight", dim));
    }
    if (cfg.IsMla()) {
      FERRY_RETURN_IF_ERROR(LoadMla(r, src, cfg, p, w));
    } else {
      FERRY_RETURN_IF_ERROR(LoadQkv(r, p, q_dim, kv_dim, dim, w));
      FERRY_ASSIGN_OR_RETURN(w.wo, r.Matrix(p + "attn_output.weight", dim, q_dim));
    }
    if (r.Has(p + "attn_output.bias")) {
      FERRY_ASSIGN_OR_RETURN(w.bo, r.Vector(p + "attn_output.bias", dim));
    }
    if (cfg.attn_sinks) {
      FERRY_ASSIGN_OR_RETURN(w.sinks, r.Vector(p + "attn_sinks.weight", cfg.n_heads));
    }
    if (cfg.IsMoeLayer(l)) {
      FERRY_ASSIGN_OR_RETURN(w.moe, MoeFfn::Load(src, cfg, l, options.repack_weights, &pack_pool,
                                                 ExpertSplit{par.tp_rank(), par.tp_size()}));
      m->weight_bytes_ += w.moe->ActiveBytesPerToken();
    } else if (cfg.fused_gate_up) {  // phi3: [2 ffn, dim], gate rows then up rows (views)
      FERRY_ASSIGN_OR_RETURN(Linear gate_up, r.Matrix(p + "ffn_up.weight", 2 * ffn, dim));
      w.w_gate = SliceRows(gate_up, 0, ffn);
      w.w_up = SliceRows(gate_up, ffn, ffn);
      FERRY_ASSIGN_OR_RETURN(w.w_down, r.Matrix(p + "ffn_down.weight", dim, ffn));
    } else {
      FERRY_ASSIGN_OR_RETURN(w.w_gate, r.Matrix(p + "ffn_gate.weight", ffn, dim));
      FERRY_ASSIGN_OR_RETURN(w.w_up, r.Matrix(p + "ffn_up.weight", ffn, dim));
      FERRY_ASSIGN_OR_RETURN(w.w_down, r.Matrix(p + "ffn_down.weight", dim, ffn));
    }
    if (cfg.qk_norm || cfg.qk_norm_whole) {
      const int64_t qn = cfg.qk_norm_whole ? q_dim : cfg.head_dim,
                    kn = cfg.qk_norm_whole ? kv_dim : cfg.head_dim;
      FERRY_ASSIGN_OR_RETURN(w.q_norm, r.Vector(p + "attn_q_norm.weight", qn));
      FERRY_ASSIGN_OR_RETURN(w.k_norm, r.Vector(p + "attn_k_norm.weight", kn));
    }
    if (par.tp_size() > 1) FERRY_RETURN_IF_ERROR(ShardLayer(w, m->shard_, cfg, p, m->slices_));
    std::vector<Linear*> lins = {&w.wq,   &w.wk,     &w.wv,   &w.wo,   &w.w_gate,
                                 &w.w_up, &w.w_down, &w.wq_a, &w.wq_b, &w.wkv_a};
    for (Linear& h : w.wk_b) lins.push_back(&h);
    for (Linear& h : w.wv_b) lins.push_back(&h);
    for (Linear* lin : lins) {
      if (!lin->data) continue;  // MoE layers have no dense FFN, MLA ones no wk/wv
      m->weight_bytes_ += lin->bytes;
      lin->MaybePack(options.repack_weights, &pack_pool);
    }
    w.wqkv = StackRows({&w.wq, &w.wk, &w.wv}, &pack_pool);
    w.w_gate_up = StackRows({&w.w_gate, &w.w_up}, &pack_pool);
    m->layers_.push_back(std::move(w));
  }
  if (options.sparsity.UsesFfnSparsity()) {
    std::vector<FfnLinears> ffns;
    for (const LayerWeights& w : m->layers_) ffns.push_back({&w.w_gate, &w.w_up, &w.w_down, &w.w_gate_up});
    FERRY_ASSIGN_OR_RETURN(m->sparse_ffn_, SparseFfn::Create(options.sparsity, cfg, ffns, &pack_pool));
  }

  // RoPE: theta_j = pos * base^(-2j/rot_dim) / factor_j * freq_scale (RopeAngles: as llama.cpp
  // computes it). Divisors per pair: llama3's rope_freqs.weight; or Phi-3 LongRoPE's short and
  // long factors (llama.cpp get_rope_factors: rope_freqs first, else long when the context
  // exceeds n_ctx_orig, else short; either may be missing, then none).
  const int32_t half = cfg.rot_dim / 2;
  auto factors = [&](const char* name) -> StatusOr<std::vector<float>> {
    if (r.Has("rope_freqs.weight")) return r.Vector("rope_freqs.weight", half);
    if (r.Has(name)) return r.Vector(name, half);
    return std::vector<float>{};
  };
  FERRY_ASSIGN_OR_RETURN(std::vector<float> short_factors, factors("rope_factors_short.weight"));
  FERRY_ASSIGN_OR_RETURN(std::vector<float> long_factors, factors("rope_factors_long.weight"));
  // YaRN (gpt-oss): the ramp over the correction dims of beta_fast and beta_slow at n_ctx_orig
  // (ggml's rope_yarn_corr_dims, ext_factor 1).
  auto yarn_ramp = [&](float theta) {
    RopeAngles::YarnRamp y;
    if (!cfg.rope_yarn) return y;
    auto corr_dim = [&](float n_rot) {
      return static_cast<float>(cfg.rot_dim) *
             std::log(static_cast<float>(cfg.n_ctx_orig) / (n_rot * 2 * 3.14159265358979323846f)) /
             (2 * std::log(theta));
    };
    y.enabled = true;
    y.lo = std::max(0.0f, std::floor(corr_dim(cfg.yarn_beta_fast)));
    y.hi = std::min(static_cast<float>(cfg.rot_dim - 1), std::ceil(corr_dim(cfg.yarn_beta_slow)));
    return y;
  };
  m->rope_ = RopeAngles(cfg.rot_dim, cfg.rope_theta, cfg.rope_freq_scale, short_factors,
                        yarn_ramp(cfg.rope_theta), cfg.rope_attn_factor);
  m->rope_long_ = RopeAngles(cfg.rot_dim, cfg.rope_theta, cfg.rope_freq_scale, std::move(long_factors),
                             yarn_ramp(cfg.rope_theta), cfg.rope_attn_factor);
  m->rope_swa_ = RopeAngles(cfg.rot_dim, cfg.rope_theta_swa, cfg.rope_freq_scale_swa,
                            std::move(short_factors), yarn_ramp(cfg.rope_theta_swa), cfg.rope_attn_factor);
  FERRY_RETURN_IF_ERROR(m->attn_sparsity_.Configure(m->sparsity_, cfg, m->AttentionRefs()));
  // The forward pass and the caller's KV cache see this rank's share of the heads and FFN.
  m->config_.n_heads = m->shard_.n_q;
  m->config_.n_kv_heads = m->shard_.n_kv;
  m->config_.ffn_dim = static_cast<int32_t>(m->shard_.n_ffn);
  return std::unique_ptr<Model>(std::move(m));
}

std::vector<AttentionWeightsRef> LlamaModel::AttentionRefs() const {
  std::vector<AttentionWeightsRef> refs;
  for (const LayerWeights& w : layers_) refs.push_back({&w.wq, &w.wk, &w.wv, &w.wo, &w.bq, &w.bk, &w.bv});
  return refs;
}
}  // namespace llama_internal

StatusOr<std::unique_ptr<Model>> CreateLlamaModel(const formats::WeightSource& source,
                                                  const ModelConfig& config, const ModelOptions& options) {
  return llama_internal::LlamaModel::Load(source, config, options);
}

}  // namespace ferry
