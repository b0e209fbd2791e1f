#include "model/kv_budget_cache.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <numeric>

#include "base/check.h"

namespace ferry {

const char* KvPolicyName(KvPolicy p) {
  switch (p) {
    case KvPolicy::kFull:
      return "full";
    case KvPolicy::kSink:
      return "sink";
    case KvPolicy::kH2O:
      return "h2o";
  }
  return "?";
}

int32_t KvBudgetConfig::Recent() const {
  if (recent_window >= 0) return std::min(recent_window, budget);
  const int32_t rest = std::max(0, budget - sink_tokens);
  return policy == KvPolicy::kH2O ? rest / 2 : rest;
}

int32_t KvBudgetConfig::Heavy() const {
  return policy == KvPolicy::kH2O ? std::max(0, budget - sink_tokens - Recent()) : 0;
}

StatusOr<std::unique_ptr<BudgetKvCache>> BudgetKvCache::Create(int32_t n_layers, int32_t n_seqs,
                                                               int32_t max_seq_len, int32_t max_batch,
                                                               int32_t n_kv_heads, int32_t head_dim,
                                                               const KvBudgetConfig& config,
                                                               SparsityStats* stats) {
  if (n_layers <= 0 || n_seqs <= 0 || max_seq_len <= 0 || max_batch <= 0 || n_kv_heads <= 0 ||
      head_dim <= 0 || config.block_size <= 0)
    return InvalidArgumentError("budgeted KV cache dimensions must be positive");
  if (config.policy == KvPolicy::kFull)
    return InvalidArgumentError("--kv-policy full keeps every token: no budget");
  if (config.budget <= 0)
    return InvalidArgumentError("--kv-budget must be positive with --kv-policy {}",
                                KvPolicyName(config.policy));
  if (config.sink_tokens < 0 || config.sink_tokens + config.Recent() > config.budget)
    return InvalidArgumentError("--sink-tokens {} + --recent-window {} exceed --kv-budget {}",
                                config.sink_tokens, config.Recent(), config.budget);
  auto c = std::make_unique<BudgetKvCache>();
  c->config_ = config;
  c->n_layers_ = n_layers;
  c->block_size_ = config.block_size;
  c->row_ = n_kv_heads * head_dim;
  c->max_seq_len_ = max_seq_len;
  c->max_batch_ = max_batch;
  // Between passes a sequence holds <= budget tokens; a pass appends <= max_batch more.
  const int64_t per_seq =
      (std::min<int64_t>(int64_t{config.budget} + max_batch, max_seq_len) + config.block_size - 1) /
      config.block_size;
  c->num_blocks_ = static_cast<int32_t>(per_seq * n_seqs);
  const size_t bytes = c->BlockBytes() / 2 * static_cast<size_t>(c->num_blocks_);
  try {
    c->k_ = AlignedBuffer(bytes);
    c->v_ = AlignedBuffer(bytes);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("cannot allocate a budgeted KV cache of 2 x {} MiB; lower --kv-budget",
                                  bytes >> 20);
  }
  c->seqs_.resize(static_cast<size_t>(n_seqs));
  for (int32_t b = c->num_blocks_; b-- > 0;) c->free_.push_back(b);
  c->stats_ = stats;
  return c;
}

size_t BudgetKvCache::Offset(int32_t layer, int32_t seq, int32_t slot) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  FERRY_CHECK(slot >= 0 && slot < s.n_stored && layer >= 0 && layer < n_layers_);
  const size_t block = static_cast<size_t>(s.table[static_cast<size_t>(slot / block_size_)]);
  return ((static_cast<size_t>(layer) * num_blocks_ + block) * block_size_ + slot % block_size_) * row_;
}

float* BudgetKvCache::KeySlot(int32_t layer, int32_t seq, int32_t slot) {
  return k_.as<float>() + Offset(layer, seq, slot);
}
float* BudgetKvCache::ValueSlot(int32_t layer, int32_t seq, int32_t slot) {
  return v_.as<float>() + Offset(layer, seq, slot);
}

kernels::KvBlocks BudgetKvCache::View(int32_t layer, int32_t seq) const {
  const size_t layer_off = static_cast<size_t>(layer) * num_blocks_ * block_size_ * row_;
  return kernels::KvBlocks{k_.as<float>() + layer_off, v_.as<float>() + layer_off,
                           seqs_[static_cast<size_t>(seq)].table.data(), block_size_};
}

void BudgetKvCache::ResizeBlocks(Seq& s, int32_t n_tokens) {
  const size_t need = static_cast<size_t>((n_tokens + block_size_ - 1) / block_size_);
  while (s.table.size() > need) {
    free_.push_back(s.table.back());
    s.table.pop_back();
  }
  while (s.table.size() < need) {
    FERRY_CHECK(!free_.empty());  // sized at Create: every sequence's worst case fits
    s.table.push_back(free_.back());
    free_.pop_back();
  }
}

void BudgetKvCache::Reset(int32_t seq) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  ResizeBlocks(s, 0);
  s = Seq{};
}

Status BudgetKvCache::BeginForward(const ForwardBatch& b) {
  for (int32_t i = 0; i < b.size();) {
    const int32_t seq = b.seq_ids[static_cast<size_t>(i)], p0 = b.positions[static_cast<size_t>(i)];
    int32_t e = i + 1;
    while (e < b.size() && b.seq_ids[static_cast<size_t>(e)] == seq) ++e;
    const int32_t len = e - i;
    Seq& s = seqs_[static_cast<size_t>(seq)];
    if (p0 == 0) {
      Reset(seq);  // a new sequence in this slot (ppl windows, bench repetitions)
    } else if (p0 < s.next_pos) {
      if (s.n_stored != s.next_pos)
        return InvalidArgumentError(
            "sequence {} rewinds to position {} but tokens before {} were already evicted "
            "by --kv-policy {}",
            seq, p0, s.next_pos, KvPolicyName(config_.policy));
      s.n_stored = s.next_pos = p0;  // nothing evicted yet: slots are positions, truncate
      s.pos.resize(static_cast<size_t>(p0));
      s.score.resize(static_cast<size_t>(p0));
      ResizeBlocks(s, p0);
    } else if (p0 > s.next_pos) {
      return InvalidArgumentError("sequence {} continues at position {} but its next position is {}", seq, p0,
                                  s.next_pos);
    }
    if (len > max_batch_ || s.n_stored + len > config_.budget + max_batch_)
      return OutOfRangeError(
          "a forward pass appends {} tokens to sequence {}, more than the {} the budgeted KV cache "
          "was sized for; lower --batch",
          len, seq, max_batch_);
    s.new_slot0 = s.n_stored;
    s.new_pos0 = p0;
    s.n_stored += len;
    for (int32_t p = p0; p < p0 + len; ++p) s.pos.push_back(p);
    s.score.resize(static_cast<size_t>(s.n_stored), 0.0f);
    ResizeBlocks(s, s.n_stored);
    i = e;
  }
  if (stats_) {
    int64_t used = 0, full = 0;
    for (const Seq& s : seqs_) {
      used += static_cast<int64_t>(s.table.size());
      full += s.next_pos;
    }
    for (int32_t i = 0; i < b.size(); ++i) full += 1;  // the tokens in flight
    stats_->kv_peak_bytes =
        std::max<int64_t>(stats_->kv_peak_bytes, used * static_cast<int64_t>(BlockBytes()));
    stats_->kv_full_bytes = std::max<int64_t>(
        stats_->kv_full_bytes, full * static_cast<int64_t>(BlockBytes() / static_cast<size_t>(block_size_)));
  }
  return Status::Ok();
}

int32_t BudgetKvCache::Slot(int32_t seq, int32_t pos) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  return s.new_slot0 + (pos - s.new_pos0);
}

float* BudgetKvCache::AttentionWeightSums(int32_t layer, int32_t seq) {
  if (config_.policy != KvPolicy::kH2O) return nullptr;
  return seqs_[static_cast<size_t>(seq)].score.data();
}

void BudgetKvCache::EndForward(const ForwardBatch& b) {
  for (int32_t i = 0; i < b.size(); ++i) {
    const int32_t seq = b.seq_ids[static_cast<size_t>(i)];
    if (i + 1 < b.size() && b.seq_ids[static_cast<size_t>(i + 1)] == seq) continue;  // last token of the run
    Seq& s = seqs_[static_cast<size_t>(seq)];
    s.next_pos = b.positions[static_cast<size_t>(i)] + 1;
    s.new_slot0 = s.n_stored;
    s.new_pos0 = s.next_pos;
    if (s.n_stored > config_.budget) Evict(seq);
  }
}

// Keeps sinks, the recent window and (H2O) the most attended of the rest; fills the holes
// below the new size with the kept tokens above it, then frees the emptied blocks.
void BudgetKvCache::Evict(int32_t seq) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const int32_t n = s.n_stored, recent_from = s.next_pos - config_.Recent();
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);  // [n]
  std::vector<int32_t> candidates;                       // slots neither sink nor recent
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = s.pos[static_cast<size_t>(i)];
    if (p < config_.sink_tokens || p >= recent_from) {
      keep[static_cast<size_t>(i)] = 1;
    } else {
      candidates.push_back(i);
    }
  }
  const size_t heavy = std::min(candidates.size(), static_cast<size_t>(config_.Heavy()));
  // Heaviest first; equal scores: the newer token.
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(heavy),
                    candidates.end(), [&](int32_t a, int32_t b) {
                      const float sa = s.score[static_cast<size_t>(a)], sb = s.score[static_cast<size_t>(b)];
                      return sa != sb ? sa > sb
                                      : s.pos[static_cast<size_t>(a)] > s.pos[static_cast<size_t>(b)];
                    });
  for (size_t c = 0; c < heavy; ++c) keep[static_cast<size_t>(candidates[c])] = 1;
  const int32_t new_n = static_cast<int32_t>(std::count(keep.begin(), keep.end(), 1));
  const size_t row_bytes = static_cast<size_t>(row_) * sizeof(float);
  int32_t hole = 0, mover = n - 1;
  while (true) {
    while (hole < new_n && keep[static_cast<size_t>(hole)]) ++hole;
    while (mover >= new_n && !keep[static_cast<size_t>(mover)]) --mover;
    if (hole >= new_n || mover < new_n) break;
    for (int32_t l = 0; l < n_layers_; ++l) {
      std::memcpy(KeySlot(l, seq, hole), KeySlot(l, seq, mover), row_bytes);
      std::memcpy(ValueSlot(l, seq, hole), ValueSlot(l, seq, mover), row_bytes);
    }
    s.pos[static_cast<size_t>(hole)] = s.pos[static_cast<size_t>(mover)];
    s.score[static_cast<size_t>(hole)] = s.score[static_cast<size_t>(mover)];
    keep[static_cast<size_t>(hole)] = 1;
    keep[static_cast<size_t>(mover)] = 0;
  }
  evicted_ += n - new_n;
  if (stats_) stats_->kv_evicted_tokens += n - new_n;
  s.n_stored = new_n;
  s.new_slot0 = new_n;
  s.pos.resize(static_cast<size_t>(new_n));
  s.score.resize(static_cast<size_t>(new_n));
  ResizeBlocks(s, new_n);
}

StatusOr<std::unique_ptr<KvCache>> CreateKvCacheFor(Model& model, int32_t n_seqs, int32_t max_seq_len,
                                                    int32_t max_batch) {
  const ModelConfig& c = model.config();
  const SparsityOptions& o = model.sparsity();
  if (o.kv_policy != KvPolicy::kFull && o.kv_budget <= 0)
    return InvalidArgumentError("--kv-policy {} needs --kv-budget N (tokens kept per sequence)",
                                KvPolicyName(o.kv_policy));
  if (o.kv_policy == KvPolicy::kFull && o.kv_budget > 0)
    return InvalidArgumentError("--kv-budget {} needs --kv-policy sink or h2o (full keeps every token)",
                                o.kv_budget);
  if (o.UsesKvBudget()) {
    KvBudgetConfig bc;
    bc.policy = o.kv_policy;
    bc.budget = o.kv_budget;
    bc.sink_tokens = o.sink_tokens;
    bc.recent_window = o.recent_window;
    FERRY_ASSIGN_OR_RETURN(auto cache,
                           BudgetKvCache::Create(c.n_layers, n_seqs, max_seq_len, max_batch, c.n_kv_heads,
                                                 c.head_dim, bc, &model.mutable_sparsity_stats()));
    return std::unique_ptr<KvCache>(std::move(cache));
  }
  FERRY_ASSIGN_OR_RETURN(ContiguousKvCache cache, ContiguousKvCache::Create(c.n_layers, n_seqs, max_seq_len,
                                                                            c.n_kv_heads, c.head_dim));
  return std::unique_ptr<KvCache>(std::make_unique<ContiguousKvCache>(std::move(cache)));
}

}  // namespace ferry
