#include "model/llama.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "kernels/kernels.h"
#include "model/attention_sparsity.h"
#include "model/linear.h"
#include "model/logit_candidates.h"
#include "model/moe.h"
#include "model/sparse_ffn.h"

namespace ferry {
namespace {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;            // [dim]; empty without pre norms (olmo2)
  std::vector<float> attn_post_norm, ffn_post_norm;  // [dim] (cfg.post_norms), else empty
  Linear wq, wk, wv, wo;                             // [q_dim, dim], [kv_dim, dim] x2, [dim, q_dim]
  std::vector<float> bq, bk, bv;                     // [q_dim], [kv_dim], [kv_dim] (qwen2, gpt-oss)
  std::vector<float> bo;                             // [dim] W_o's bias (gpt-oss), else empty
  std::vector<float> sinks;                          // [n_heads] attention sink logits (gpt-oss), else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] each (qwen3: cfg.qk_norm); olmo2: [q_dim], [kv_dim]
  Linear w_gate, w_up, w_down;        // [ffn, dim] x2, [dim, ffn]
  Linear wqkv, w_gate_up;             // stacked q|k|v, gate|up rows (linear.h StackRows); n_out 0 if not
  std::unique_ptr<MoeFfn> moe;        // MoE models: replaces w_gate/w_up/w_down
  // deepseek2's MLA (cfg.IsMla(); then wq/wk/wv are unused but for wq without q_lora_rank):
  Linear wq_a, wq_b;                       // [q_lora, dim], [n_heads mla_k_dim, q_lora] (q_lora_rank > 0)
  std::vector<float> q_a_norm, kv_a_norm;  // [q_lora], [kv_lora]
  Linear wkv_a;                            // [kv_lora + rot, dim]: compressed KV | shared k_pe
  std::vector<Linear> wk_b, wv_b;          // [n_heads] x [kv_lora, nope] (W_UK^T), [v_dim, kv_lora] (W_UV)
};

// x[i] *= s: granite's multipliers and LongRoPE's attention factor, on buffers of a few rows
// (not worth a kernel).
void ScaleInPlace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

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

// The projections of one layer's attention block as the forward pass runs them: the dense
// layer, or the kept heads of a pruned one (SparseAttention). Bias, RoPE, the KV write,
// attention and W_o are one code path for both.
struct AttentionBlock {
  const Linear* wqkv = nullptr;  // stacked q|k|v rows, or null: wq, wk, wv apart
  const Linear *wq = nullptr, *wk = nullptr, *wv = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // [n_q hd], [n_kv hd] x2, or null
  const float *q_norm = nullptr, *k_norm = nullptr;         // [hd] each, shared by the heads, or null
  bool qk_norm_whole = false;                               // olmo2: q_norm [n_q hd], k_norm [n_kv hd]
  const Linear* wo = nullptr;                               // [dim, n_q hd]
  int n_q = 0, n_kv = 0;                                    // heads computed
  const int32_t* kv_heads = nullptr;  // [n_kv] cache KV head of each computed one; null: all, in order
  const int32_t* head_kv = nullptr;   // [n_q] cache KV head each query head reads; null: GQA grouping
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

// Scratch slots of the layer (model/scratch.h).
enum Slot : int {
  kX,
  kXn,
  kQ,
  kK,
  kV,
  kAttn,
  kTmp,
  kGate,
  kUp,
  kQkv,
  kGateUp,
  kTapped,
  kLogitsPart,
  kMlaQa,   // [n, q_lora]
  kMlaQ,    // [n, n_heads, mla_k_dim] the heads' own queries
  kMlaKv,   // [n, kv_lora + rot] latent rows
  kMlaIn,   // [n_heads, n, max(nope, kv_lora)] per-head inputs of W_UK^T / W_UV
  kMlaOut,  // [n_heads, n, max(kv_lora, v_dim)] their outputs
  kMlaV,    // [n, n_heads v_dim]
};
enum IntSlot : int { kKvSlots, kRowTopK };
enum ByteSlot : int { kLogitsSend, kLogitsAll };

class LlamaModel final : public Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const formats::WeightSource& src, const ModelConfig& cfg,
                                               const ModelOptions& options);

  Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, ThreadPool* pool,
                 const ForwardOptions& options) const override;
  bool WritesHidden() const override { return true; }
  size_t WeightBytes() const override { return weight_bytes_; }
  int pipeline_stages() const override { return par_.pp_size(); }
  StageLayers stage_layers() const override { return stage_; }
  Status ShareStageLogits(const ForwardBatch& batch, float* logits, ForwardScratch* scratch,
                          uint64_t* sent_bytes) const override;

 private:
  // What every step of one forward call reads.
  struct Pass {
    const ForwardBatch& b;
    int64_t n;  // tokens
    KvCache& kv;
    ThreadPool* pool;
    const SparsityOptions& so;
    SparsityStats* stats;        // null: not counted
    const ActivationTaps* taps;  // null: none (fused projections allowed)
    ForwardScratch& s;
    const int32_t* slots;   // [n] where each token's K/V live
    bool spread_runs;       // decode batch: one run per thread (see Forward)
    const float* inv_freq;  // [rot_dim/2] the global layers' RoPE table for this cache's context
  };

  Status CheckBatch(const ForwardBatch& batch, const KvCache& kv) const;
  Status CheckRunOptions(const ForwardOptions& options, const SparsityOptions& so) const;
  std::vector<AttentionWeightsRef> AttentionRefs() const;
  void EmbedTokens(const ForwardBatch& batch, float* x) const;

  AttentionBlock BlockOf(int32_t l) const;
  // y: [n, n_out] = linear(x), through the activation taps' act_quant when there is one.
  void Apply(const Pass& p, int32_t l, LinearKind kind, const Linear& w, const float* x, float* y) const;
  void Tap(const Pass& p, int32_t l, InputKind input, const float* x, int64_t n_in) const;
  // xn: [n, dim] -> out: [n, dim] = W_o(attention(q, K, V)); appends the tokens' K/V.
  void Attention(const Pass& p, int32_t l, const float* xn, float* out) const;
  // The same for deepseek2's multi-head latent attention (ModelConfig::IsMla).
  void MlaAttention(const Pass& p, int32_t l, const float* xn, float* out) const;
  // attn: [n, n_heads, value dims] = attention of q: [n, n_heads, head_dim] over layer l's cache
  // (value dims: head_dim, or KvCacheTypes::v_in_k of a latent cache),
  // one kernel call per sequence run (spread over the threads for decode batches).
  void AttendRuns(const Pass& p, int32_t l, const AttentionBlock& blk, const float* q, float* attn) const;
  // One token's rotated k and its v ([n_kv, head_dim] each) into the cache at its slot.
  void WriteKv(const Pass& p, int32_t l, const AttentionBlock& blk, int64_t i, const float* k,
               const float* v) const;
  // xn: [n, dim] -> out: [n, dim]: dense, MoE or contextual-sparse FFN.
  void Ffn(const Pass& p, int32_t l, const float* xn, float* out) const;
  // x: [n, dim] += post_norm(delta) (delta itself without a post norm; delta is overwritten),
  // then xn: [n, dim] = next_norm(x), or a copy of x when next_norm is empty (olmo2); with
  // next_norm null, the add only.
  void ResidualAdd(int64_t n, float* x, float* delta, const std::vector<float>& post_norm,
                   const std::vector<float>* next_norm, float* xn) const;
  // xn: [n_out, dim] -> logits: [n_out, n_vocab] on every rank. Vocabulary split: row i is
  // gathered whole when top_k[i] is 0, else only its top_k[i] largest (the rest -inf); the
  // gathered bytes are added to *gathered_bytes (when not null).
  Status Head(const Pass& p, const float* xn, int64_t n_out, const int32_t* top_k, float* logits,
              uint64_t* gathered_bytes) const;
  // Pipeline: the last stage sends every stage the n_out logits rows [n_out, n_vocab], each as
  // Head left it: whole when top_k[i] is 0, else only its top_k[i] largest as (logit, token)
  // pairs, scattered on arrival (the rest -inf). Bytes sent are added to *sent_bytes.
  Status BroadcastLogits(ForwardScratch& s, int64_t n_out, const int32_t* top_k, float* logits,
                         uint64_t* sent_bytes) const;
  // Pipeline: the last stage sends every stage the final hidden states hidden: [n, dim]
  // (embeddings), after the logits.
  Status BroadcastHidden(int64_t n, float* hidden) const {
    return par_.pp->Broadcast(hidden, static_cast<size_t>(n * config_.dim) * sizeof(float),
                              par_.pp_size() - 1);
  }
  // The element-wise end of the head on rows [n_rows, width]: granite's logit scale, gemma's
  // soft cap (before any shard picks its largest logits, so that they are the final values).
  void FinishLogits(float* rows, int64_t n_rows, int64_t width) const;

  Linear token_embd_;               // [n_vocab, dim]
  Linear output_;                   // [n_vocab, dim] (= token_embd_ when tied)
  std::vector<float> output_norm_;  // [dim]
  std::vector<LayerWeights> layers_;
  std::vector<float> inv_freq_;       // [rot_dim/2] RoPE angle per position, scaling applied
  std::vector<float> inv_freq_long_;  // [rot_dim/2] the same with LongRoPE's long factors (phi3)
  std::vector<float> inv_freq_swa_;   // [rot_dim/2] the same for sliding-window layers (gemma)
  size_t weight_bytes_ = 0;
  SparseAttention attn_sparsity_;  // pruned heads (built at load), value skipping, progressive precision
  std::unique_ptr<SparseFfn> sparse_ffn_;  // contextual FFN sparsity when asked for at load
  ParallelLayout par_;                     // how the model is split over processes (none by default)
  bool exact_gelu_ = false;                // ModelOptions::exact_gelu
  TensorShard shard_;                      // this tensor rank's heads, FFN rows and vocabulary rows
  StageLayers stage_;                      // this pipeline stage's layers
  std::vector<int64_t> vocab_split_;       // [tp_size + 1] first vocabulary row of each tensor rank
  std::vector<std::shared_ptr<AlignedBuffer>> slices_;  // the column slices' bytes (W_o, down)
};

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

  // theta_j = pos * base^(-2j/rot_dim) * freq_scale / factor_j, the exponent built up
  // multiplicatively in float as llama.cpp does, so angles agree to the last bit or so.
  // Divisors per pair: llama3's rope_freqs.weight; or Phi-3 LongRoPE's short and long factors
  // (llama.cpp get_rope_factors: rope_freqs first, else long when the context exceeds
  // n_ctx_orig, else short; either may be missing, then 1).
  const int32_t half = cfg.rot_dim / 2;
  const std::vector<float> ones(static_cast<size_t>(half), 1.0f);
  auto factors = [&](const char* name) -> StatusOr<std::vector<float>> {
    if (r.Has("rope_freqs.weight")) return r.Vector("rope_freqs.weight", half);
    if (r.Has(name)) return r.Vector(name, half);
    return ones;
  };
  FERRY_ASSIGN_OR_RETURN(const std::vector<float> short_factors, factors("rope_factors_short.weight"));
  FERRY_ASSIGN_OR_RETURN(const std::vector<float> long_factors, factors("rope_factors_long.weight"));
  // YaRN (gpt-oss): pair j's frequency is freq_scale * f (1 - ramp_j) + f ramp_j, ramp_j = 1 below
  // the correction dim of beta_fast, 0 above that of beta_slow, linear between (ggml's
  // rope_yarn_corr_dims and rope_yarn_ramp, ext_factor 1).
  float corr_lo = 0.0f, corr_hi = 0.0f;
  auto yarn_corr_dims = [&](float theta) {
    auto corr_dim = [&](float n_rot) {
      return static_cast<float>(cfg.rot_dim) *
             std::log(static_cast<float>(cfg.n_ctx_orig) / (n_rot * 2 * 3.14159265358979323846f)) /
             (2 * std::log(theta));
    };
    corr_lo = std::max(0.0f, std::floor(corr_dim(cfg.yarn_beta_fast)));
    corr_hi = std::min(static_cast<float>(cfg.rot_dim - 1), std::ceil(corr_dim(cfg.yarn_beta_slow)));
  };
  auto inv_freq = [&](float theta, float freq_scale, const std::vector<float>& div) {
    const float theta_scale = std::pow(theta, -2.0f / static_cast<float>(cfg.rot_dim));
    if (cfg.rope_yarn) yarn_corr_dims(theta);
    std::vector<float> out;
    float base = 1.0f;
    for (int32_t j = 0; j < half; ++j) {
      const float f = base / div[static_cast<size_t>(j)];
      if (cfg.rope_yarn) {
        const float y = (static_cast<float>(j) - corr_lo) / std::max(0.001f, corr_hi - corr_lo);
        const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
        out.push_back(freq_scale * f * (1.0f - ramp) + f * ramp);
      } else {
        out.push_back(base * freq_scale / div[static_cast<size_t>(j)]);
      }
      base *= theta_scale;
    }
    return out;
  };
  m->inv_freq_ = inv_freq(cfg.rope_theta, cfg.rope_freq_scale, short_factors);
  m->inv_freq_long_ = inv_freq(cfg.rope_theta, cfg.rope_freq_scale, long_factors);
  m->inv_freq_swa_ = inv_freq(cfg.rope_theta_swa, cfg.rope_freq_scale_swa, short_factors);
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

Status LlamaModel::CheckBatch(const ForwardBatch& b, const KvCache& kv) const {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq_ids.size() != n || b.want_logits.size() != n ||
      (!b.logits_top_k.empty() && b.logits_top_k.size() != n))
    return InvalidArgumentError("forward batch arrays have different lengths");
  for (int32_t k : b.logits_top_k)
    if (k < 0) return InvalidArgumentError("a forward batch asks for the top {} logits of a row (0: all)", k);
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= config_.n_vocab)
      return InvalidArgumentError("token id {} is outside the vocabulary [0, {})", b.tokens[i],
                                  config_.n_vocab);
    if (b.positions[i] < 0 || b.positions[i] >= kv.MaxSeqLen())
      return OutOfRangeError("position {} exceeds the context size {}", b.positions[i], kv.MaxSeqLen());
    if (b.seq_ids[i] < 0 || b.seq_ids[i] >= kv.NumSeqs())
      return InvalidArgumentError("sequence id {} is outside [0, {})", b.seq_ids[i], kv.NumSeqs());
    if (i > 0 && b.seq_ids[i] == b.seq_ids[i - 1] && b.positions[i] != b.positions[i - 1] + 1)
      return InvalidArgumentError("positions of sequence {} are not consecutive", b.seq_ids[i]);
  }
  // Each sequence must appear as one contiguous run.
  for (size_t i = 1; i < n; ++i) {
    if (b.seq_ids[i] == b.seq_ids[i - 1]) continue;
    for (size_t j = 0; j < i; ++j)
      if (b.seq_ids[j] == b.seq_ids[i])
        return InvalidArgumentError("sequence {} is split within the batch", b.seq_ids[i]);
  }
  return Status::Ok();
}

void LlamaModel::EmbedTokens(const ForwardBatch& b, float* x) const {
  const size_t row_bytes = RowBytes(token_embd_.type, config_.dim);
  for (int32_t i = 0; i < b.size(); ++i) {
    const auto* row = static_cast<const uint8_t*>(token_embd_.data) +
                      row_bytes * static_cast<size_t>(b.tokens[static_cast<size_t>(i)]);
    kernels::DequantizeRow(token_embd_.type, row, x + static_cast<size_t>(i) * config_.dim, config_.dim);
  }
}

Status LlamaModel::CheckRunOptions(const ForwardOptions& options, const SparsityOptions& so) const {
  if (options.sparsity) {
    FERRY_RETURN_IF_ERROR(attn_sparsity_.CheckRunOptions(so));
    if (so.UsesFfnSparsity() &&
        (!sparse_ffn_ || so.ffn_stats != sparsity_.ffn_stats || so.ffn_predictor != sparsity_.ffn_predictor))
      return InvalidArgumentError(
          "FFN sparsity with sidecar '{}' was not loaded with the model: load it with the sidecar to run",
          so.ffn_predictor.empty() ? so.ffn_stats : so.ffn_predictor);
  }
  if (options.taps && !so.Exact())
    return InvalidArgumentError("activation taps run the exact model only (no sparsity options)");
  if ((config_.sliding_window > 0 || config_.attn_softcap > 0.0f) && so.UsesSparseAttention())
    return InvalidArgumentError(
        "sparse attention (head pruning, value skipping, progressive scores) is not supported for {} "
        "(sliding-window / soft-capped attention)",
        config_.arch);
  if (config_.IsMla() && (options.taps || !so.OnlyMoeCapacity()))
    return UnsupportedError(
        "{} (multi-head latent attention) runs without activation taps (quantization calibration) or "
        "sparsity "
        "options",
        config_.arch);
  if (par_.Split() && (options.taps || !so.OnlyMoeCapacity()))
    return UnsupportedError("a model split over processes runs without activation taps or sparsity options");
  return Status::Ok();
}

AttentionBlock LlamaModel::BlockOf(int32_t l) const {
  AttentionBlock blk;
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  if (!w.q_norm.empty()) {  // per-head weights: the same for pruned and dense layers
    blk.q_norm = w.q_norm.data();
    blk.k_norm = w.k_norm.data();
    blk.qk_norm_whole = config_.qk_norm_whole;
  }
  if (const SparseAttention::PrunedLayer* pr = attn_sparsity_.Pruned(l)) {
    const int64_t qd = static_cast<int64_t>(pr->kept.size()) * config_.head_dim;
    const int64_t kvd = static_cast<int64_t>(pr->kept_kv.size()) * config_.head_dim;
    blk.wqkv = &pr->wqkv;
    if (!pr->bias.empty()) {
      blk.bq = pr->bias.data();
      blk.bk = blk.bq + qd;
      blk.bv = blk.bk + kvd;
    }
    blk.wo = &pr->wo;
    blk.n_q = static_cast<int>(pr->kept.size());
    blk.n_kv = static_cast<int>(pr->kept_kv.size());
    blk.kv_heads = pr->kept_kv.data();
    blk.head_kv = pr->head_kv.data();
    return blk;
  }
  blk.wqkv = w.wqkv.n_out > 0 ? &w.wqkv : nullptr;
  blk.wq = &w.wq;
  blk.wk = &w.wk;
  blk.wv = &w.wv;
  if (!w.bq.empty()) {
    blk.bq = w.bq.data();
    blk.bk = w.bk.data();
    blk.bv = w.bv.data();
  }
  blk.wo = &w.wo;
  blk.n_q = config_.n_heads;
  blk.n_kv = config_.n_kv_heads;
  return blk;
}

void LlamaModel::Tap(const Pass& p, int32_t l, InputKind input, const float* x, int64_t n_in) const {
  if (p.taps && p.taps->on_input) p.taps->on_input(l, input, x, p.n, n_in);
}

void LlamaModel::Apply(const Pass& p, int32_t l, LinearKind kind, const Linear& w, const float* x,
                       float* y) const {
  if (p.taps && p.taps->act_quant) {                        // each linear quantizes its own copy of the input
    float* copy = p.s.layer.Floats(kTapped, p.n * w.n_in);  // [n, n_in]
    std::copy_n(x, p.n * w.n_in, copy);
    p.taps->act_quant(l, kind, copy, p.n, w.n_in);
    x = copy;
  }
  w.Apply(x, p.n, y, p.pool);
}

void LlamaModel::WriteKv(const Pass& p, int32_t l, const AttentionBlock& blk, int64_t i, const float* k,
                         const float* v) const {
  const ModelConfig& c = config_;
  const int32_t seq = p.b.seq_ids[static_cast<size_t>(i)], slot = p.slots[i];
  if (!blk.kv_heads) {  // k, v: [n_kv_heads, head_dim], stored in the cache's K/V types
    p.kv.StoreKey(l, seq, slot, k);
    SparseAttention::CopyKeyInt8(p.kv, l, seq, slot, k, c.n_kv_heads, c.head_dim);
    p.kv.StoreValue(l, seq, slot, v);
    return;
  }
  const int64_t hd = c.head_dim;  // pruned: only the kept KV heads, at their place in the cache
  for (int j = 0; j < blk.n_kv; ++j) {
    const int32_t g = blk.kv_heads[j];
    p.kv.StoreKeyHead(l, seq, slot, g, k + j * hd);
    p.kv.StoreValueHead(l, seq, slot, g, v + j * hd);
  }
  if (int8_t* k8 = p.kv.KeySlotInt8(l, seq, slot)) {
    float* ks = p.kv.KeyScaleSlot(l, seq, slot);
    for (int j = 0; j < blk.n_kv; ++j) {
      const int64_t g = blk.kv_heads[j];
      ks[g] = kernels::QuantizeActInt8(k + j * hd, c.head_dim, 0.f, k8 + g * hd);
    }
  }
}

void LlamaModel::Attention(const Pass& p, int32_t l, const float* xn, float* out) const {
  const ModelConfig& c = config_;
  if (c.IsMla()) return MlaAttention(p, l, xn, out);
  const AttentionBlock blk = BlockOf(l);
  const int64_t n = p.n, hd = c.head_dim, qd = blk.n_q * hd, kvd = blk.n_kv * hd;
  float* q = p.s.layer.Floats(kQ, n * qd);  // [n, n_q, hd] what attention reads
  // Projected rows: q_rows/k_rows/v_rows with their row strides (one stacked matrix or three).
  float *q_rows, *k_rows, *v_rows;
  int64_t q_stride = qd, kv_stride = kvd;
  Tap(p, l, InputKind::kAttnIn, xn, c.dim);
  if (blk.wqkv && !p.taps) {
    const int64_t width = qd + 2 * kvd;
    float* qkv = p.s.layer.Floats(kQkv, n * width);  // [n, n_q + 2 n_kv, hd]
    blk.wqkv->Apply(xn, n, qkv, p.pool);
    q_rows = qkv;
    k_rows = qkv + qd;
    v_rows = qkv + qd + kvd;
    q_stride = kv_stride = width;
  } else {
    q_rows = q;
    k_rows = p.s.layer.Floats(kK, n * kvd);  // [n, n_kv, hd]
    v_rows = p.s.layer.Floats(kV, n * kvd);  // [n, n_kv, hd]
    Apply(p, l, LinearKind::kQ, *blk.wq, xn, q_rows);
    Apply(p, l, LinearKind::kK, *blk.wk, xn, k_rows);
    Apply(p, l, LinearKind::kV, *blk.wv, xn, v_rows);
  }
  for (int64_t i = 0; i < n; ++i) {
    float *qi = q_rows + i * q_stride, *ki = k_rows + i * kv_stride, *vi = v_rows + i * kv_stride;
    if (blk.bq) {
      kernels::AddInPlace(qi, blk.bq, qd);
      kernels::AddInPlace(ki, blk.bk, kvd);
      kernels::AddInPlace(vi, blk.bv, kvd);
    }
    if (blk.qk_norm_whole) {  // olmo2: all heads of q, of k, normalized together
      kernels::RmsNorm(qi, blk.q_norm, qi, qd, c.rms_eps);
      kernels::RmsNorm(ki, blk.k_norm, ki, kvd, c.rms_eps);
    } else if (blk.q_norm) {  // qwen3: each head RMS-normalized on its own, before RoPE
      for (int h = 0; h < blk.n_q; ++h) kernels::RmsNorm(qi + h * hd, blk.q_norm, qi + h * hd, hd, c.rms_eps);
      for (int h = 0; h < blk.n_kv; ++h)
        kernels::RmsNorm(ki + h * hd, blk.k_norm, ki + h * hd, hd, c.rms_eps);
    }
    const int32_t pos = p.b.positions[static_cast<size_t>(i)];
    if (c.UsesRope(l)) {  // SmolLM3's NoPE layers attend by content alone
      const float* freq = c.IsSlidingLayer(l) ? inv_freq_swa_.data() : p.inv_freq;
      kernels::Rope(qi, blk.n_q, c.head_dim, c.rot_dim, pos, freq, c.rope_neox);
      kernels::Rope(ki, blk.n_kv, c.head_dim, c.rot_dim, pos, freq, c.rope_neox);
      if (c.rope_attn_factor != 1.0f) {  // LongRoPE's scaled cos/sin: the rotated dims only
        for (int h = 0; h < blk.n_q; ++h) ScaleInPlace(qi + h * hd, c.rot_dim, c.rope_attn_factor);
        for (int h = 0; h < blk.n_kv; ++h) ScaleInPlace(ki + h * hd, c.rot_dim, c.rope_attn_factor);
      }
    }
    if (p.kv.types().rotate_k) {  // --cache-rotate: q.k unchanged, K's outliers spread before rounding
      kernels::HadamardRotate(qi, blk.n_q, hd);
      kernels::HadamardRotate(ki, blk.n_kv, hd);
    }
    if (qi != q + i * qd) std::copy_n(qi, qd, q + i * qd);
    WriteKv(p, l, blk, i, ki, vi);
  }
  float* attn = p.s.layer.Floats(kAttn, n * qd);  // [n, n_q, hd]
  AttendRuns(p, l, blk, q, attn);
  Tap(p, l, InputKind::kAttnOut, attn, qd);
  Apply(p, l, LinearKind::kO, *blk.wo, attn, out);
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  if (!w.bo.empty())
    for (int64_t i = 0; i < n; ++i) kernels::AddInPlace(out + i * c.dim, w.bo.data(), c.dim);
}

void LlamaModel::AttendRuns(const Pass& p, int32_t l, const AttentionBlock& blk, const float* q,
                            float* attn) const {
  const ModelConfig& c = config_;
  // A latent cache (KvCacheTypes::v_in_k) returns fewer values per head than q has.
  const int64_t qd = blk.n_q * c.head_dim, od = blk.n_q * int64_t{p.kv.types().ValueDim(c.head_dim)};
  const float scale = c.AttentionScale();
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  const kernels::AttentionVariant variant{c.IsSlidingLayer(l) ? c.sliding_window : 0, c.attn_softcap,
                                          w.sinks.empty() ? nullptr : w.sinks.data()};
  auto attend = [&](const ForwardBatch::SeqRun& r, ThreadPool* pool) {
    const int32_t seq = p.b.seq_ids[static_cast<size_t>(r.begin)];
    const int n_q = static_cast<int>(r.end - r.begin);
    attn_sparsity_.Attend(p.so, c, q + r.begin * qd, n_q, blk.n_q, blk.head_kv, p.slots + r.begin,
                          p.kv.View(l, seq), attn + r.begin * od, p.stats, pool, variant);
    if (blk.head_kv) return;
    if (float* sums = p.kv.AttentionWeightSums(l, seq))  // H2O: what each kept key was paid
      kernels::AccumulateAttentionWeights(q + r.begin * qd, n_q, p.slots + r.begin, c.n_heads, c.n_kv_heads,
                                          c.head_dim, scale, p.kv.View(l, seq), sums);
  };
  const std::vector<ForwardBatch::SeqRun>& runs = p.s.runs;
  if (p.spread_runs) {  // each run on one thread, runs handed out one at a time
    std::atomic<size_t> next{0};
    p.pool->Run([&](int, int) {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < runs.size();)
        attend(runs[i], nullptr);
    });
  } else {
    for (const ForwardBatch::SeqRun& r : runs) attend(r, p.pool);
  }
}

void LlamaModel::MlaAttention(const Pass& p, int32_t l, const float* xn, float* out) const {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  const int64_t n = p.n, nh = c.n_heads, hd = c.head_dim, rank = c.kv_lora_rank, rot = c.rot_dim,
                kd = c.mla_k_dim, nope = c.MlaNopeDim(), vd = c.mla_v_dim;
  float* qh = p.s.layer.Floats(kMlaQ, n * nh * kd);  // [n, n_heads, nope | rope]
  if (c.q_lora_rank > 0) {
    const int64_t ql = c.q_lora_rank;
    float* qa = p.s.layer.Floats(kMlaQa, n * ql);  // [n, q_lora]
    w.wq_a.Apply(xn, n, qa, p.pool);
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(qa + i * ql, w.q_a_norm.data(), qa + i * ql, ql, c.rms_eps);
    w.wq_b.Apply(qa, n, qh, p.pool);
  } else {
    w.wq.Apply(xn, n, qh, p.pool);
  }
  float* kv = p.s.layer.Floats(kMlaKv, n * hd);  // [n, kv_lora | rope]
  w.wkv_a.Apply(xn, n, kv, p.pool);
  float* q = p.s.layer.Floats(kQ, n * nh * hd);  // [n, n_heads, kv_lora | rope] what attention reads
  for (int64_t i = 0; i < n; ++i) {
    const int32_t pos = p.b.positions[static_cast<size_t>(i)];
    float *ki = kv + i * hd, *qi = q + i * nh * hd;
    kernels::RmsNorm(ki, w.kv_a_norm.data(), ki, rank, c.rms_eps);
    for (int64_t h = 0; h < nh; ++h) std::copy_n(qh + (i * nh + h) * kd + nope, rot, qi + h * hd + rank);
    // The rope parts sit at offset kv_lora of each row: Rope rotates the first rot of each.
    kernels::Rope(ki + rank, 1, static_cast<int>(hd), static_cast<int>(rot), pos, p.inv_freq, c.rope_neox);
    kernels::Rope(qi + rank, static_cast<int>(nh), static_cast<int>(hd), static_cast<int>(rot), pos,
                  p.inv_freq, c.rope_neox);
    if (c.rope_attn_factor != 1.0f) {  // YaRN's magnitude on the rotated dims
      ScaleInPlace(ki + rank, rot, c.rope_attn_factor);
      for (int64_t h = 0; h < nh; ++h) ScaleInPlace(qi + h * hd + rank, rot, c.rope_attn_factor);
    }
    const int32_t seq = p.b.seq_ids[static_cast<size_t>(i)], slot = p.slots[i];
    p.kv.StoreKey(l, seq, slot, ki);
    // V is the latent part of the same row: in it (KvCacheTypesFor's layout), or a copy beside it
    // for a cache made without that layout (attention then returns whole rows; the first kv_lora count).
    p.kv.StoreValue(l, seq, slot, ki);
  }
  // Per head: q_nope absorbed into the latent space (W_UK^T), later the latent output through
  // W_UV; the heads run in parallel, each one small matrix over the pass's tokens.
  const int64_t in_w = std::max(nope, rank), out_w = std::max(rank, vd);
  float* hin = p.s.layer.Floats(kMlaIn, nh * n * in_w);     // [n_heads, n, in_w]
  float* hout = p.s.layer.Floats(kMlaOut, nh * n * out_w);  // [n_heads, n, out_w]
  auto per_head = [&](auto&& body) {
    auto range = [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) body(h, hin + h * n * in_w, hout + h * n * out_w);
    };
    if (p.pool) {
      p.pool->ParallelFor(nh, range);
    } else {
      range(0, nh);
    }
  };
  per_head([&](int64_t h, float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(qh + (i * nh + h) * kd, nope, x + i * nope);
    w.wk_b[static_cast<size_t>(h)].Apply(x, n, y, nullptr);
    for (int64_t i = 0; i < n; ++i) std::copy_n(y + i * rank, rank, q + (i * nh + h) * hd);
  });
  AttentionBlock blk;
  blk.n_q = static_cast<int>(nh);
  blk.n_kv = 1;
  const int64_t aw = p.kv.types().ValueDim(c.head_dim);  // kv_lora, or whole rows without the layout
  float* attn = p.s.layer.Floats(kAttn, n * nh * aw);    // [n, n_heads, aw]; the first kv_lora count
  AttendRuns(p, l, blk, q, attn);
  float* av = p.s.layer.Floats(kMlaV, n * nh * vd);  // [n, n_heads v_dim]
  per_head([&](int64_t h, float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(attn + (i * nh + h) * aw, rank, x + i * rank);
    w.wv_b[static_cast<size_t>(h)].Apply(x, n, y, nullptr);
    for (int64_t i = 0; i < n; ++i) std::copy_n(y + i * vd, vd, av + i * nh * vd + h * vd);
  });
  w.wo.Apply(av, n, out, p.pool);
}

void LlamaModel::Ffn(const Pass& p, int32_t l, const float* xn, float* out) const {
  const LayerWeights& w = layers_[static_cast<size_t>(l)];
  const int64_t n = p.n, ffn = config_.ffn_dim;
  if (w.moe) {
    w.moe->Forward(xn, n, out, p.so.moe_capacity_factor, p.stats, p.s.ffn, p.pool);
    return;
  }
  if (sparse_ffn_ && p.so.UsesFfnSparsity()) {
    sparse_ffn_->Forward(l, {&w.w_gate, &w.w_up, &w.w_down, &w.w_gate_up}, p.so, xn, n, out, p.stats, p.s.ffn,
                         p.pool);
    return;
  }
  Tap(p, l, InputKind::kFfnIn, xn, config_.dim);
  float* gate = p.s.layer.Floats(kGate, n * ffn);  // [n, ffn] gate, then act(gate) * up
  // GeGLU (gemma; ggml's fp16 GELU table unless exact_gelu_) or SwiGLU
  auto* act = !config_.gelu_ffn ? &kernels::SiluMul
              : exact_gelu_     ? &kernels::GeluTanhMul
                                : &kernels::GeluFp16TableMul;
  if (w.w_gate_up.n_out > 0 && !p.taps) {
    float* gu = p.s.layer.Floats(kGateUp, n * 2 * ffn);  // [n, 2 * ffn]: gate | up per token
    w.w_gate_up.Apply(xn, n, gu, p.pool);
    for (int64_t i = 0; i < n; ++i) act(gu + i * 2 * ffn, gu + i * 2 * ffn + ffn, gate + i * ffn, ffn);
  } else {
    float* up = p.s.layer.Floats(kUp, n * ffn);  // [n, ffn]
    Apply(p, l, LinearKind::kGate, w.w_gate, xn, gate);
    Apply(p, l, LinearKind::kUp, w.w_up, xn, up);
    act(gate, up, gate, n * ffn);
  }
  Tap(p, l, InputKind::kFfnMid, gate, ffn);
  Apply(p, l, LinearKind::kDown, w.w_down, gate, out);  // [n, dim]
}

void LlamaModel::ResidualAdd(int64_t n, float* x, float* delta, const std::vector<float>& post_norm,
                             const std::vector<float>* next_norm, float* xn) const {
  const int64_t dim = config_.dim;
  if (!post_norm.empty())
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(delta + i * dim, post_norm.data(), delta + i * dim, dim, config_.rms_eps);
  if (next_norm && !next_norm->empty()) {
    for (int64_t i = 0; i < n; ++i)
      kernels::AddRmsNorm(x + i * dim, delta + i * dim, next_norm->data(), xn + i * dim, dim,
                          config_.rms_eps);
    return;
  }
  kernels::AddInPlace(x, delta, n * dim);
  if (next_norm) std::copy_n(x, n * dim, xn);
}

Status LlamaModel::Forward(const ForwardBatch& b, KvCache& kv, float* logits, ThreadPool* pool,
                           const ForwardOptions& options) const {
  FERRY_RETURN_IF_ERROR(CheckBatch(b, kv));
  const SparsityOptions& so = options.sparsity ? *options.sparsity : sparsity_;
  FERRY_RETURN_IF_ERROR(CheckRunOptions(options, so));
  const ModelConfig& c = config_;
  const int64_t n = b.size();
  if (n == 0) return Status::Ok();
  FERRY_RETURN_IF_ERROR(attn_sparsity_.BeginForward(so, kv, options.stats));
  FERRY_RETURN_IF_ERROR(kv.BeginForward(b));
  ForwardScratch own;  // only for callers that keep no scratch of their own
  ForwardScratch& s = options.scratch ? *options.scratch : own;
  // Where each token's K/V live: its position, unless a budgeted cache stores kept tokens densely.
  int32_t* slots = s.layer.Ints(kKvSlots, n);  // [n]
  int64_t sum_keys = 0;  // keys attended in this pass, over all queries (head-pruning counts)
  int32_t max_slot = 0;
  for (int64_t i = 0; i < n; ++i) {
    slots[i] = kv.Slot(b.seq_ids[static_cast<size_t>(i)], b.positions[static_cast<size_t>(i)]);
    sum_keys += slots[i] + 1;
    max_slot = std::max(max_slot, slots[i]);
  }
  // A sliding window counts positions back from the query: it needs every position in its
  // own slot (no budgeted cache) and no H2O scores (their kernel has no window).
  if (c.sliding_window > 0) {
    for (int64_t i = 0; i < n; ++i)
      if (slots[i] != b.positions[static_cast<size_t>(i)] || kv.AttentionWeightSums(0, b.seq_ids[0]))
        return InvalidArgumentError(
            "{} has sliding-window layers, which need a KV cache keeping every position (no --kv-budget)",
            c.arch);
  }
  b.SeqRuns(&s.runs);  // attention is one kernel call per sequence run
  // A decode batch is many one-query runs, each too small to be worth the pool inside the
  // kernel: spread the runs over the threads instead. Threads never change a row's bits, so
  // outputs are identical either way. Not when one run would dominate (its split across
  // threads is worth more), nor with sparse attention or H2O, which count into shared state.
  const bool spread_runs = pool && pool->size() > 1 && s.runs.size() > 1 &&
                           static_cast<int64_t>(s.runs.size()) == n &&
                           int64_t{max_slot + 1} * pool->size() <= sum_keys && !so.UsesSparseAttention() &&
                           !kv.AttentionWeightSums(0, b.seq_ids[0]);
  // LongRoPE (phi3): the long factors when the cache holds a longer context than the original
  // one, as llama.cpp decides by n_ctx_seq; the same for every token of the pass.
  const float* inv_freq = c.UsesLongRopeFactors(kv.MaxSeqLen()) ? inv_freq_long_.data() : inv_freq_.data();
  const Pass p{b, n, kv, pool, so, options.stats, options.taps, s, slots, spread_runs, inv_freq};
  const int64_t dim = c.dim;
  float* x = s.layer.Floats(kX, n * dim);      // [n, dim] residual stream
  float* xn = s.layer.Floats(kXn, n * dim);    // [n, dim] normalized
  float* tmp = s.layer.Floats(kTmp, n * dim);  // [n, dim] a block's output

  const int pp = par_.pp_rank(), n_stages = par_.pp_size();
  constexpr int kHiddenTag = 18;
  if (pp == 0) {
    EmbedTokens(b, x);
    if (c.embedding_scale != 0.0f) ScaleInPlace(x, n * dim, c.embedding_scale);  // granite
  } else {  // the previous stage's residual stream
    FERRY_RETURN_IF_ERROR(par_.pp->Recv(x, static_cast<size_t>(n * dim) * sizeof(float), pp - 1, kHiddenTag));
  }
  // Megatron: each rank's W_o / down output is a partial sum over its heads / FFN rows.
  auto reduce = [&](float* y) {
    return par_.tp_size() > 1 ? par_.tp->AllReduceSum(y, n * dim) : Status::Ok();
  };
  for (int32_t l = stage_.first; l < stage_.last; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    if (l == stage_.first) {  // later layers get their norm fused with the previous residual add
      if (w.attn_norm.empty()) std::copy_n(x, n * dim, xn);  // olmo2: attention reads x itself
      for (int64_t i = 0; i < n && !w.attn_norm.empty(); ++i)
        kernels::RmsNorm(x + i * dim, w.attn_norm.data(), xn + i * dim, dim, c.rms_eps);
    }
    Attention(p, l, xn, tmp);
    FERRY_RETURN_IF_ERROR(reduce(tmp));
    if (c.residual_scale != 0.0f) ScaleInPlace(tmp, n * dim, c.residual_scale);  // granite
    if (so.UsesHeadPruning() && options.stats)
      attn_sparsity_.CountHeadWork(c, l, n, sum_keys, *options.stats);
    ResidualAdd(n, x, tmp, w.attn_post_norm, &w.ffn_norm, xn);
    Ffn(p, l, xn, tmp);
    FERRY_RETURN_IF_ERROR(reduce(tmp));
    if (c.residual_scale != 0.0f) ScaleInPlace(tmp, n * dim, c.residual_scale);
    // The residual add fused with the next layer's attention norm; after the stage's last, add only.
    ResidualAdd(n, x, tmp, w.ffn_post_norm,
                l + 1 < stage_.last ? &layers_[static_cast<size_t>(l) + 1].attn_norm : nullptr, xn);
  }

  if (pp + 1 < n_stages) {  // hand the stream on; the last stage sends back the logits
    FERRY_RETURN_IF_ERROR(par_.pp->Send(x, static_cast<size_t>(n * dim) * sizeof(float), pp + 1, kHiddenTag));
    if (!options.defer_stage_logits)
      FERRY_RETURN_IF_ERROR(ShareStageLogits(b, logits, &s, options.logits_gathered_bytes));
    if (options.hidden) FERRY_RETURN_IF_ERROR(BroadcastHidden(n, options.hidden));
    kv.EndForward(b);
    return Status::Ok();
  }
  int32_t* top_k = p.s.layer.Ints(kRowTopK, n);  // [n_out] what each logits row needs
  // Final norm for every token when the hidden states are asked for (embeddings), else only
  // for the tokens whose logits are wanted; the head only for the latter.
  if (options.hidden)
    for (int64_t i = 0; i < n; ++i)
      kernels::RmsNorm(x + i * dim, output_norm_.data(), options.hidden + i * dim, dim, c.rms_eps);
  int64_t n_out = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!b.want_logits[static_cast<size_t>(i)]) continue;
    top_k[n_out] = b.LogitsTopK(static_cast<size_t>(i));
    if (options.hidden)
      std::copy_n(options.hidden + i * dim, dim, xn + n_out * dim);
    else
      kernels::RmsNorm(x + i * dim, output_norm_.data(), xn + n_out * dim, dim, c.rms_eps);
    ++n_out;
  }
  if (n_out > 0) FERRY_RETURN_IF_ERROR(Head(p, xn, n_out, top_k, logits, options.logits_gathered_bytes));
  if (n_out > 0 && n_stages > 1 && !options.defer_stage_logits)
    FERRY_RETURN_IF_ERROR(BroadcastLogits(s, n_out, top_k, logits, options.logits_gathered_bytes));
  if (options.hidden && n_stages > 1) FERRY_RETURN_IF_ERROR(BroadcastHidden(n, options.hidden));
  kv.EndForward(b);
  return Status::Ok();
}

Status LlamaModel::ShareStageLogits(const ForwardBatch& b, float* logits, ForwardScratch* scratch,
                                    uint64_t* sent_bytes) const {
  if (par_.pp_size() == 1) return Status::Ok();
  ForwardScratch own;
  ForwardScratch& s = scratch ? *scratch : own;
  int32_t* top_k = s.layer.Ints(kRowTopK, b.size());  // [n_out] what each logits row needs
  int64_t n_out = 0;
  for (size_t i = 0; i < static_cast<size_t>(b.size()); ++i)
    if (b.want_logits[i]) top_k[n_out++] = b.LogitsTopK(i);
  return n_out > 0 ? BroadcastLogits(s, n_out, top_k, logits, sent_bytes) : Status::Ok();
}

Status LlamaModel::BroadcastLogits(ForwardScratch& s, int64_t n_out, const int32_t* top_k, float* logits,
                                   uint64_t* sent_bytes) const {
  const int root = par_.pp_size() - 1;
  const bool sender = par_.pp->rank() == root;
  const int64_t n_vocab = config_.n_vocab;
  const size_t row_bytes = static_cast<size_t>(n_vocab) * sizeof(float);
  if (std::all_of(top_k, top_k + n_out, [](int32_t k) { return k == 0; })) {  // logprobs, perplexity
    if (sent_bytes) *sent_bytes += static_cast<uint64_t>(n_out) * row_bytes;
    return par_.pp->Broadcast(logits, static_cast<size_t>(n_out) * row_bytes, root);
  }
  size_t bytes = 0;
  for (int64_t i = 0; i < n_out; ++i)
    bytes += top_k[i] == 0
                 ? row_bytes
                 : static_cast<size_t>(ShardCandidateCount(top_k[i], n_vocab)) * sizeof(LogitCandidate);
  uint8_t* msg = s.layer.Bytes(kLogitsSend, static_cast<int64_t>(bytes));  // rows in order
  uint8_t* at = msg;
  for (int64_t i = 0; i < n_out && sender; ++i) {
    if (top_k[i] == 0) {
      std::memcpy(at, logits + i * n_vocab, row_bytes);
      at += row_bytes;
    } else {
      ShardTopK(logits + i * n_vocab, n_vocab, 0, top_k[i], reinterpret_cast<LogitCandidate*>(at));
      at += static_cast<size_t>(ShardCandidateCount(top_k[i], n_vocab)) * sizeof(LogitCandidate);
    }
  }
  FERRY_RETURN_IF_ERROR(par_.pp->Broadcast(msg, bytes, root));
  if (sent_bytes) *sent_bytes += bytes;
  for (int64_t i = 0; i < n_out && !sender; ++i) {
    if (top_k[i] == 0) {
      std::memcpy(logits + i * n_vocab, at, row_bytes);
      at += row_bytes;
    } else {
      const size_t m = static_cast<size_t>(ShardCandidateCount(top_k[i], n_vocab));
      ScatterCandidates({reinterpret_cast<const LogitCandidate*>(at), m}, logits + i * n_vocab, n_vocab);
      at += m * sizeof(LogitCandidate);
    }
  }
  return Status::Ok();
}

void LlamaModel::FinishLogits(float* rows, int64_t n_rows, int64_t width) const {
  // granite divides the logits, as llama.cpp does: times the float reciprocal.
  if (config_.logit_scale != 0.0f) ScaleInPlace(rows, n_rows * width, 1.0f / config_.logit_scale);
  if (config_.final_softcap > 0.0f) kernels::SoftCap(rows, n_rows * width, config_.final_softcap);  // gemma
}

Status LlamaModel::Head(const Pass& p, const float* xn, int64_t n_out, const int32_t* top_k, float* logits,
                        uint64_t* gathered_bytes) const {
  const int n_ranks = par_.tp_size();
  if (n_ranks == 1) {
    output_.Apply(xn, n_out, logits, p.pool);
    FinishLogits(logits, n_out, config_.n_vocab);
    return Status::Ok();
  }
  // Every rank computes its vocabulary rows; what sampling needs of them is gathered to every
  // rank (rank 0 samples; so does every rank of run/bench, which keeps their token streams
  // identical): a whole row for a row with top_k 0, else the shard's top_k largest logits.
  const int64_t n_vocab = config_.n_vocab, nv = shard_.n_vocab;
  float* part = p.s.layer.Floats(kLogitsPart, n_out * nv);  // [n_out, this rank's vocab]
  output_.Apply(xn, n_out, part, p.pool);
  FinishLogits(part, n_out, nv);
  // A rank's message: its shard of every whole row, in row order, then its candidates of every
  // reduced row, in row order ([ShardCandidateCount(top_k, shard vocab)] each).
  auto message_bytes = [&](int64_t shard_vocab) {
    size_t bytes = 0;
    for (int64_t i = 0; i < n_out; ++i)
      bytes += top_k[i] == 0
                   ? static_cast<size_t>(shard_vocab) * sizeof(float)
                   : static_cast<size_t>(ShardCandidateCount(top_k[i], shard_vocab)) * sizeof(LogitCandidate);
    return bytes;
  };
  std::vector<size_t> counts;
  size_t total = 0;
  for (int r = 0; r < n_ranks; ++r) {
    counts.push_back(message_bytes(vocab_split_[r + 1] - vocab_split_[r]));
    total += counts.back();
  }
  const int rank = par_.tp_rank();
  const bool all_whole = std::all_of(top_k, top_k + n_out, [](int32_t k) { return k == 0; });
  // Only whole rows (logprobs, perplexity): the message is `part` as it is.
  uint8_t* send = all_whole
                      ? reinterpret_cast<uint8_t*>(part)
                      : p.s.layer.Bytes(kLogitsSend, static_cast<int64_t>(counts[static_cast<size_t>(rank)]));
  uint8_t* at = send;
  for (int64_t i = 0; i < n_out && !all_whole; ++i)
    if (top_k[i] == 0) {
      std::memcpy(at, part + i * nv, static_cast<size_t>(nv) * sizeof(float));
      at += static_cast<size_t>(nv) * sizeof(float);
    }
  for (int64_t i = 0; i < n_out; ++i)
    if (top_k[i] > 0) {
      LogitCandidate* c = reinterpret_cast<LogitCandidate*>(at);
      ShardTopK(part + i * nv, nv, shard_.vocab0, top_k[i], c);
      at += static_cast<size_t>(ShardCandidateCount(top_k[i], nv)) * sizeof(LogitCandidate);
    }
  uint8_t* all =
      p.s.layer.Bytes(kLogitsAll, static_cast<int64_t>(total));  // rank 0's message, then rank 1's, ...
  FERRY_RETURN_IF_ERROR(par_.tp->AllGatherV(send, counts, all));
  if (gathered_bytes) *gathered_bytes += total;
  // Unpack each rank's message in rank order: whole rows into place, candidates merged.
  std::vector<std::span<const LogitCandidate>> shards(static_cast<size_t>(n_ranks));
  std::vector<const uint8_t*> reduced(static_cast<size_t>(n_ranks));  // each rank's next candidates
  const uint8_t* msg = all;
  for (int r = 0; r < n_ranks; ++r) {
    const int64_t v0 = vocab_split_[r], rv = vocab_split_[r + 1] - v0;
    const uint8_t* q = msg;
    for (int64_t i = 0; i < n_out; ++i)
      if (top_k[i] == 0) {
        std::memcpy(logits + i * n_vocab + v0, q, static_cast<size_t>(rv) * sizeof(float));
        q += static_cast<size_t>(rv) * sizeof(float);
      }
    reduced[static_cast<size_t>(r)] = q;
    msg += counts[static_cast<size_t>(r)];
  }
  std::vector<LogitCandidate> merged;
  for (int64_t i = 0; i < n_out; ++i) {
    if (top_k[i] == 0) continue;
    for (int r = 0; r < n_ranks; ++r) {
      const size_t m =
          static_cast<size_t>(ShardCandidateCount(top_k[i], vocab_split_[r + 1] - vocab_split_[r]));
      const uint8_t*& q = reduced[static_cast<size_t>(r)];
      shards[static_cast<size_t>(r)] = {reinterpret_cast<const LogitCandidate*>(q), m};
      q += m * sizeof(LogitCandidate);
    }
    MergeShardCandidates(shards, top_k[i], &merged);
    ScatterCandidates(merged, logits + i * n_vocab, n_vocab);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> CreateLlamaModel(const formats::WeightSource& source,
                                                  const ModelConfig& config, const ModelOptions& options) {
  return LlamaModel::Load(source, config, options);
}

}  // namespace ferry
