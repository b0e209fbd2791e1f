#include "model/kv_budget_cache.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <numeric>

#include "base/check.h"

namespace ferry {

StatusOr<std::unique_ptr<BudgetKvCache>> BudgetKvCache::Create(int32_t n_layers, int32_t n_seqs,
                                                               int32_t max_seq_len, int32_t max_batch,
                                                               int32_t n_kv_heads, int32_t head_dim,
                                                               const KvBudgetConfig& config,
                                                               SparsityStats* stats, const KvCacheTypes& types) {
  if (n_layers <= 0 || n_seqs <= 0 || max_seq_len <= 0 || max_batch <= 0 || n_kv_heads <= 0 ||
      head_dim <= 0 || config.block_size <= 0)
    return InvalidArgumentError("budgeted KV cache dimensions must be positive");
  FERRY_RETURN_IF_ERROR(config.Validate());
  auto c = std::make_unique<BudgetKvCache>();
  c->config_ = config;
  c->n_layers_ = n_layers;
  c->block_size_ = config.block_size;
  c->max_seq_len_ = max_seq_len;
  c->max_batch_ = max_batch;
  // Between passes a sequence holds <= budget tokens; a pass appends <= max_batch more.
  const int64_t per_seq =
      (std::min<int64_t>(int64_t{config.budget} + max_batch, max_seq_len) + config.block_size - 1) /
      config.block_size;
  c->num_blocks_ = static_cast<int32_t>(per_seq * n_seqs);
  FERRY_RETURN_IF_ERROR(c->kv_.Allocate(static_cast<size_t>(n_layers) * c->num_blocks_ * c->block_size_,
                                        n_kv_heads, head_dim, types, "a budgeted KV cache", "--kv-budget"));
  c->seqs_.resize(static_cast<size_t>(n_seqs));
  for (int32_t b = c->num_blocks_; b-- > 0;) c->free_.push_back(b);
  c->stats_ = stats;
  return c;
}

size_t BudgetKvCache::RowSlot(int32_t layer, const Seq& s, int32_t slot) const {
  FERRY_CHECK(slot >= 0 && static_cast<size_t>(slot / block_size_) < s.table.size() && layer >= 0 &&
              layer < n_layers_);
  const size_t block = static_cast<size_t>(s.table[static_cast<size_t>(slot / block_size_)]);
  return (static_cast<size_t>(layer) * num_blocks_ + block) * block_size_ + slot % block_size_;
}

size_t BudgetKvCache::SlotIndex(int32_t layer, int32_t seq, int32_t slot) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  FERRY_CHECK(slot < s.kept.size());
  return RowSlot(layer, s, slot);
}

kernels::KvBlocks BudgetKvCache::View(int32_t layer, int32_t seq) const {
  kernels::KvBlocks view{nullptr, nullptr, seqs_[static_cast<size_t>(seq)].table.data(), block_size_};
  kv_.Attach(view, static_cast<size_t>(layer) * num_blocks_ * block_size_);
  return view;
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
  for (const ForwardBatch::SeqRun& r : b.SeqRuns()) {
    const int32_t seq = b.seq_ids[static_cast<size_t>(r.begin)],
                  p0 = b.positions[static_cast<size_t>(r.begin)];
    const int32_t len = r.end - r.begin;
    Seq& s = seqs_[static_cast<size_t>(seq)];
    if (p0 == 0) {
      Reset(seq);  // a new sequence in this slot (ppl windows, bench repetitions)
    } else if (p0 < s.next_pos) {
      if (s.kept.size() != s.next_pos)
        return InvalidArgumentError(
            "sequence {} rewinds to position {} but tokens before {} were already evicted "
            "by --kv-policy {}",
            seq, p0, s.next_pos, KvPolicyName(config_.policy));
      s.next_pos = p0;  // nothing evicted yet: slots are positions, truncate
      s.kept.pos.resize(static_cast<size_t>(p0));
      s.kept.score.resize(static_cast<size_t>(p0));
      ResizeBlocks(s, p0);
    } else if (p0 > s.next_pos) {
      return InvalidArgumentError("sequence {} continues at position {} but its next position is {}", seq, p0,
                                  s.next_pos);
    }
    if (len > max_batch_ || s.kept.size() + len > config_.budget + max_batch_)
      return OutOfRangeError(
          "a forward pass appends {} tokens to sequence {}, more than the {} the budgeted KV cache "
          "was sized for; lower --batch",
          len, seq, max_batch_);
    s.new_slot0 = s.kept.size();
    s.new_pos0 = p0;
    s.kept.Append(p0, len);
    ResizeBlocks(s, s.kept.size());
  }
  if (stats_) {
    int64_t used = 0, full = 0;
    for (const Seq& s : seqs_) {
      used += static_cast<int64_t>(s.table.size());
      full += s.next_pos;
    }
    full += b.size();  // the tokens in flight
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
  return seqs_[static_cast<size_t>(seq)].kept.score.data();
}

void BudgetKvCache::EndForward(const ForwardBatch& b) {
  for (int32_t i = 0; i < b.size(); ++i) {
    const int32_t seq = b.seq_ids[static_cast<size_t>(i)];
    if (i + 1 < b.size() && b.seq_ids[static_cast<size_t>(i + 1)] == seq) continue;  // last token of the run
    Seq& s = seqs_[static_cast<size_t>(seq)];
    s.next_pos = b.positions[static_cast<size_t>(i)] + 1;
    s.new_slot0 = s.kept.size();
    s.new_pos0 = s.next_pos;
    if (s.kept.size() > config_.budget) Evict(seq);
  }
}

// The policy picks what to keep and how to compact (model/kv_budget_policy.h); this applies
// its row moves to every layer's K/V and frees the emptied blocks.
void BudgetKvCache::Evict(int32_t seq) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const int32_t n = s.kept.size();
  // Moves read slots >= the new size: their blocks are freed only after the copies.
  const std::vector<SlotMove> moves = EvictOverBudget(s.kept, s.next_pos, config_);
  const int32_t new_n = s.kept.size();
  for (const SlotMove& m : moves)
    for (int32_t l = 0; l < n_layers_; ++l) kv_.CopySlots(RowSlot(l, s, m.to), RowSlot(l, s, m.from), 1);
  evicted_ += n - new_n;
  if (stats_) stats_->kv_evicted_tokens += n - new_n;
  s.new_slot0 = new_n;
  ResizeBlocks(s, new_n);
}

StatusOr<std::unique_ptr<KvCache>> CreateKvCacheFor(const ModelConfig& c, const SparsityOptions& o,
                                                    int32_t n_seqs, int32_t max_seq_len, int32_t max_batch,
                                                    SparsityStats* stats, const KvCacheTypes& types) {
  FERRY_ASSIGN_OR_RETURN(std::optional<KvBudgetConfig> budget, KvBudgetFromOptions(o));
  FERRY_ASSIGN_OR_RETURN(const KvCacheTypes layout, KvCacheTypesFor(c, types));
  if (budget) {
    FERRY_ASSIGN_OR_RETURN(auto cache,
                           BudgetKvCache::Create(c.n_layers, n_seqs, max_seq_len, max_batch, c.n_kv_heads,
                                                 c.head_dim, *budget, stats, layout));
    return std::unique_ptr<KvCache>(std::move(cache));
  }
  FERRY_ASSIGN_OR_RETURN(
      ContiguousKvCache cache,
      ContiguousKvCache::Create(c.n_layers, n_seqs, max_seq_len, c.n_kv_heads, c.head_dim, layout));
  return std::unique_ptr<KvCache>(std::make_unique<ContiguousKvCache>(std::move(cache)));
}

}  // namespace ferry
