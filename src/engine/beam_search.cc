#include "engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "base/check.h"
#include "constraint/matcher.h"
#include "kv/kv_cache_manager.h"
#include "model/forward_batch.h"
#include "model/paged_kv_cache.h"
#include "sampling/logprobs.h"

namespace ferry {

namespace {

struct Beam {
  kv::KvSequence kv;
  std::vector<int32_t> tokens;  // generated so far
  double cum = 0;
  std::vector<TokenLogprob> likely;            // [2W] most likely next tokens, descending (ties: lower id)
  std::optional<constraint::Matcher> matcher;  // with a constraint: the grammar state after `tokens`
};

// The beam's most likely next tokens; with a constraint, among the allowed tokens only.
std::vector<TokenLogprob> Likely(float* logits, int32_t n_vocab, int32_t top, Beam& beam,
                                 std::vector<uint64_t>& mask) {
  if (beam.matcher) {
    mask.resize(beam.matcher->mask_words());
    beam.matcher->FillMask(mask);
    int32_t n = std::min(n_vocab, beam.matcher->grammar().vocab().size());
    for (int32_t t = 0; t < n_vocab; ++t)
      if (t >= n || !((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1)) logits[t] = -INFINITY;
  }
  std::vector<TokenLogprob> likely = ComputeLogprobs(logits, n_vocab, -1, top).top;
  std::erase_if(likely, [](const TokenLogprob& t) { return std::isinf(t.logprob); });
  return likely;
}

struct Candidate {
  int32_t beam;
  int32_t token;
  double cum;
};

double Score(double cum, size_t length, float length_penalty) {
  return cum /
         std::pow(static_cast<double>(std::max<size_t>(length, 1)), static_cast<double>(length_penalty));
}

// The search's private KV state: a paged cache with one batch slot per beam.
class BeamKv {
 public:
  static StatusOr<std::unique_ptr<BeamKv>> Create(const ModelConfig& c, int32_t width, int32_t max_len,
                                                  int32_t block_size, const KvCacheTypes& types) {
    auto kv = std::unique_ptr<BeamKv>(new BeamKv);
    const int32_t per_seq = (max_len + block_size - 1) / block_size;
    // Worst case: every beam private, plus one block of copy-on-write headroom each.
    const int32_t num_blocks = width * (per_seq + 1);
    FERRY_ASSIGN_OR_RETURN(const KvCacheTypes layout, KvCacheTypesFor(c, types));
    FERRY_ASSIGN_OR_RETURN(PagedKvCache cache,
                           PagedKvCache::Create(c.n_layers, num_blocks, block_size, c.n_kv_heads, c.head_dim,
                                                width, max_len, layout));
    kv->cache = std::make_unique<PagedKvCache>(std::move(cache));
    kv->mgr = std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{num_blocks, block_size, false});
    return kv;
  }
  int32_t BlocksInUse() const { return mgr->num_blocks() - mgr->NumFreeBlocks(); }

  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<kv::KvCacheManager> mgr;  // after cache: beams' leases return here
};

}  // namespace

StatusOr<std::vector<BeamHypothesis>> BeamSearch(const Model& model, ThreadPool* pool,
                                                 const std::vector<int32_t>& prompt,
                                                 const BeamSearchOptions& o, BeamSearchStats* stats_out) {
  const ModelConfig& cfg = model.config();
  const int32_t W = o.beam_width;
  if (W < 1 || W > 64) return InvalidArgumentError("beam width {} is out of range; use 1..64", W);
  if (o.max_tokens < 1)
    return InvalidArgumentError("max_tokens must be >= 1 for beam search, got {}", o.max_tokens);
  if (prompt.empty()) return InvalidArgumentError("the prompt is empty (no tokens)");
  if (model.sparsity().UsesKvBudget())
    return UnsupportedError("beam search is not supported with --kv-policy {} (a KV budget)",
                            KvPolicyName(model.sparsity().kv_policy));
  if (o.block_size < 1) return InvalidArgumentError("block size must be positive, got {}", o.block_size);
  const int32_t P = static_cast<int32_t>(prompt.size());
  const int32_t max_len = P + o.max_tokens;
  if (max_len > cfg.n_ctx_train)
    return OutOfRangeError("prompt ({} tokens) + max_tokens ({}) exceeds the model's context of {}", P,
                           o.max_tokens, cfg.n_ctx_train);
  const int32_t n_vocab = cfg.n_vocab;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<BeamKv> kv,
                         BeamKv::Create(cfg, W, max_len, o.block_size, o.kv_types));

  BeamSearchStats stats;
  stats.unshared_blocks = W * kv->mgr->BlocksFor(max_len);
  ForwardBatch batch;
  ForwardScratch scratch;
  ForwardOptions fo;
  fo.scratch = &scratch;
  std::vector<float> logits;  // [beams, n_vocab]

  // Prefill the prompt once; every beam descends from this sequence.
  std::vector<Beam> live(1);
  if (!kv->mgr->AllocateSlots(live[0].kv, P)) return ResourceExhaustedError("no KV blocks for the prompt");
  kv->cache->SetBlockTable(0, live[0].kv.blocks());
  for (int32_t p = 0; p < P; ++p) batch.Add(prompt[static_cast<size_t>(p)], p, 0, p + 1 == P);
  logits.resize(static_cast<size_t>(n_vocab));
  FERRY_RETURN_IF_ERROR(model.Forward(batch, *kv->cache, logits.data(), pool, fo));
  const int32_t top = std::min(2 * W, n_vocab);
  std::vector<uint64_t> mask;
  if (o.constraint) live[0].matcher.emplace(o.constraint);
  live[0].likely = Likely(logits.data(), n_vocab, top, live[0], mask);
  stats.peak_blocks = kv->BlocksInUse();

  auto is_end = [&](int32_t t) {
    return std::find(o.end_tokens.begin(), o.end_tokens.end(), t) != o.end_tokens.end();
  };
  std::vector<BeamHypothesis> finished;
  auto worst_finished = [&] {
    double w = INFINITY;
    for (const BeamHypothesis& h : finished) w = std::min(w, h.score);
    return w;
  };
  auto add_finished = [&](BeamHypothesis h) {
    finished.push_back(std::move(h));
    std::stable_sort(finished.begin(), finished.end(),
                     [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
    if (static_cast<int32_t>(finished.size()) > W) finished.resize(static_cast<size_t>(W));
  };

  for (int32_t step = 0; step < o.max_tokens && !live.empty(); ++step) {
    // Top 2W candidates of each beam, then the best overall (ties: beam, then token order).
    std::vector<Candidate> cands;
    for (size_t b = 0; b < live.size(); ++b)
      for (const TokenLogprob& t : live[b].likely)
        cands.push_back({static_cast<int32_t>(b), t.token, live[b].cum + t.logprob});
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& b) { return a.cum > b.cum; });

    std::vector<Candidate> next;
    for (size_t rank = 0; rank < cands.size() && static_cast<int32_t>(next.size()) < W; ++rank) {
      const Candidate& c = cands[rank];
      const Beam& parent = live[static_cast<size_t>(c.beam)];
      if (is_end(c.token)) {
        if (static_cast<int32_t>(rank) >= W) continue;  // an end token outside the top W is not a hypothesis
        BeamHypothesis h;
        h.tokens = parent.tokens;
        h.tokens.push_back(c.token);
        h.cum_logprob = c.cum;
        h.score = Score(c.cum, parent.tokens.size(), o.length_penalty);
        h.finish_reason = "stop";
        add_finished(std::move(h));
        continue;
      }
      next.push_back(c);
    }

    // Done when W hypotheses are finished and the best live candidate cannot beat them.
    const bool last_step = step + 1 == o.max_tokens;
    if (next.empty()) {
      live.clear();
      break;
    }
    const size_t new_len = live[0].tokens.size() + 1;
    if (static_cast<int32_t>(finished.size()) >= W &&
        worst_finished() >= Score(next[0].cum, new_len, o.length_penalty)) {
      live.clear();
      break;
    }
    if (last_step) {
      for (const Candidate& c : next) {
        BeamHypothesis h;
        h.tokens = live[static_cast<size_t>(c.beam)].tokens;
        h.tokens.push_back(c.token);
        h.cum_logprob = c.cum;
        h.score = Score(c.cum, h.tokens.size(), o.length_penalty);
        h.finish_reason = "length";
        add_finished(std::move(h));
      }
      live.clear();
      break;
    }

    // Children fork their parent's blocks; parents are released before anyone appends, so
    // an only child writes into its (now unshared) last block without a copy.
    std::vector<Beam> children(next.size());
    for (size_t i = 0; i < next.size(); ++i) {
      const Beam& parent = live[static_cast<size_t>(next[i].beam)];
      children[i].kv = kv->mgr->Fork(parent.kv);
      children[i].tokens = parent.tokens;
      children[i].tokens.push_back(next[i].token);
      children[i].cum = next[i].cum;
      if (parent.matcher) {
        children[i].matcher = parent.matcher;
        const bool allowed = children[i].matcher->AcceptToken(next[i].token);
        FERRY_CHECK(allowed);  // it came from the masked candidates
      }
    }
    live.clear();
    const int32_t pos = P + static_cast<int32_t>(children[0].tokens.size()) - 1;
    batch.Clear();
    for (size_t i = 0; i < children.size(); ++i) {
      std::optional<kv::SlotAllocation> alloc = kv->mgr->AllocateSlots(children[i].kv, pos + 1);
      if (!alloc) return InternalError("beam search ran out of its own KV blocks");
      for (const kv::BlockCopy& c : alloc->copies) kv->cache->CopyBlock(c.src, c.dst);
      stats.block_copies += static_cast<int32_t>(alloc->copies.size());
      kv->cache->SetBlockTable(static_cast<int32_t>(i), children[i].kv.blocks());
      batch.Add(children[i].tokens.back(), pos, static_cast<int32_t>(i), true);
    }
    stats.peak_blocks = std::max(stats.peak_blocks, kv->BlocksInUse());
    logits.resize(children.size() * static_cast<size_t>(n_vocab));
    FERRY_RETURN_IF_ERROR(model.Forward(batch, *kv->cache, logits.data(), pool, fo));
    ++stats.steps;
    for (size_t i = 0; i < children.size(); ++i)
      children[i].likely =
          Likely(logits.data() + i * static_cast<size_t>(n_vocab), n_vocab, top, children[i], mask);
    live = std::move(children);
  }
  live.clear();
  stats.blocks_in_use_after = kv->BlocksInUse();
  if (stats_out) *stats_out = stats;
  return finished;
}

}  // namespace ferry
