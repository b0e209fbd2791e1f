#include "speculative/draft_model_proposer.h"

#include <algorithm>

#include "base/check.h"

namespace ferry::spec {

StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(const Model& draft,
                                                                         int32_t target_vocab,
                                                                         const DraftKvConfig& kv,
                                                                         ThreadPool* pool) {
  const ModelConfig& c = draft.config();
  if (c.n_vocab != target_vocab)
    return InvalidArgumentError(
        "the draft model '{}' has a vocabulary of {} tokens but the target has {}; a draft model must share "
        "the "
        "target's tokenizer (or use --draft-quant q4 to draft with the target's own weights)",
        c.name, c.n_vocab, target_vocab);
  if (kv.num_blocks <= 0 || kv.block_size <= 0)
    return InvalidArgumentError("the draft KV cache needs blocks");
  FERRY_ASSIGN_OR_RETURN(const KvCacheTypes types, KvCacheTypesFor(c, kv.types));
  FERRY_ASSIGN_OR_RETURN(PagedKvCache cache,
                         PagedKvCache::Create(c.n_layers, kv.num_blocks, kv.block_size, c.n_kv_heads,
                                              c.head_dim, kv.max_seqs, kv.max_seq_len, types));
  return std::unique_ptr<DraftModelProposer>(new DraftModelProposer(
      draft, std::move(cache), kv::KvCacheConfig{kv.num_blocks, kv.block_size, /*prefix_caching=*/false},
      pool));
}

DraftModelProposer::DraftModelProposer(const Model& draft, PagedKvCache cache, const kv::KvCacheConfig& kv,
                                       ThreadPool* pool)
    : model_(draft), cache_(std::move(cache)), kv_(std::make_unique<kv::KvCacheManager>(kv)), pool_(pool) {}

DraftModelProposer::SeqState& DraftModelProposer::StateOf(SpecState& s) {
  if (!s.proposer) s.proposer = std::make_unique<SeqState>();
  auto* st = dynamic_cast<SeqState*>(s.proposer.get());
  FERRY_CHECK(st != nullptr);
  return *st;
}

void DraftModelProposer::Rollback(SpecState& state, std::span<const int32_t> tokens) {
  if (!state.proposer) return;
  SeqState& st = StateOf(state);
  const auto mismatch = std::mismatch(st.computed.begin(), st.computed.end(), tokens.begin(), tokens.end());
  const int32_t keep = static_cast<int32_t>(mismatch.first - st.computed.begin());
  if (keep == static_cast<int32_t>(st.computed.size())) return;
  kv_->Truncate(st.kv, keep);
  st.computed.resize(static_cast<size_t>(keep));
}

Status DraftModelProposer::Propose(std::span<const ProposeRequest> requests) {
  const int32_t n_vocab = model_.config().n_vocab;
  struct Active {
    const ProposeRequest* req;
    SeqState* st;
    int32_t k;                     // drafts wanted
    std::vector<int32_t> history;  // tokens + drafts so far (penalties see both, as the target's p does)
  };
  std::vector<Active> active;
  for (const ProposeRequest& r : requests) {
    r.state->ClearDraft();
    const int32_t k = std::min(r.state->k, r.max_draft);
    const int32_t len = static_cast<int32_t>(r.tokens.size());
    if (k <= 0 || len == 0 || active.size() >= static_cast<size_t>(cache_.NumSeqs())) continue;
    SeqState& st = StateOf(*r.state);
    Rollback(*r.state, r.tokens);
    // The last token's logits are needed, so it is always (re)computed.
    if (static_cast<int32_t>(st.computed.size()) >= len) {
      kv_->Truncate(st.kv, len - 1);
      st.computed.resize(static_cast<size_t>(len - 1));
    }
    // Slots for the catch-up tokens and the k - 1 drafts fed back (the k-th is never fed).
    if (!kv_->AllocateSlots(st.kv, len + k - 1)) continue;  // no draft KV room: no drafts this step
    active.push_back({&r, &st, k, std::vector<int32_t>(r.tokens.begin(), r.tokens.end())});
  }
  if (active.empty()) return Status::Ok();
  for (size_t a = 0; a < active.size(); ++a)
    cache_.SetBlockTable(static_cast<int32_t>(a), active[a].st->kv.blocks());

  std::vector<float> probs(static_cast<size_t>(n_vocab));  // [n_vocab]
  for (int32_t j = 0;; ++j) {
    // Round j: round 0 catches each sequence up to its last token; round j > 0 feeds draft j-1.
    batch_.Clear();
    for (size_t a = 0; a < active.size(); ++a) {
      Active& x = active[a];
      if (j >= x.k) continue;
      const int32_t slot = static_cast<int32_t>(a);
      if (j == 0) {
        const int32_t len = static_cast<int32_t>(x.req->tokens.size());
        for (int32_t p = static_cast<int32_t>(x.st->computed.size()); p < len; ++p)
          batch_.Add(x.req->tokens[static_cast<size_t>(p)], p, slot, p + 1 == len);
      } else {
        const int32_t pos = static_cast<int32_t>(x.history.size()) - 1;
        batch_.Add(x.history.back(), pos, slot, true);
      }
    }
    if (batch_.size() == 0) break;
    logits_.resize(static_cast<size_t>(batch_.NumLogits()) * static_cast<size_t>(n_vocab));
    ForwardOptions fo;
    fo.scratch = &scratch_;
    FERRY_RETURN_IF_ERROR(model_.Forward(batch_, cache_, logits_.data(), pool_, fo));
    size_t row = 0;
    for (Active& x : active) {
      if (j >= x.k) continue;
      if (j == 0) {
        x.st->computed.assign(x.req->tokens.begin(), x.req->tokens.end());
      } else {
        x.st->computed.push_back(x.history.back());
      }
      float* l = logits_.data() + row++ * static_cast<size_t>(n_vocab);
      SpecState& s = *x.req->state;
      Sampler& sampler = *x.req->sampler;
      int32_t d;
      if (sampler.greedy()) {
        d = sampler.Sample(l, x.history);  // penalties + argmax, no randomness
      } else {
        sampler.ProcessedProbs(l, x.history, probs);
        d = sampler.SampleFromProbs(probs);
        s.draft_probs.insert(s.draft_probs.end(), probs.begin(), probs.end());
      }
      s.draft.push_back(d);
      x.history.push_back(d);
    }
  }
  return Status::Ok();
}

}  // namespace ferry::spec
