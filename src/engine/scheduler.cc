#include "engine/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "base/check.h"

namespace ferry {

namespace {
int32_t Width(const Request& r) { return 1 + static_cast<int32_t>(r.fork_samplers.size()); }
}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvCacheManager& kv, std::function<bool(int32_t)> is_eog,
                     std::function<double()> now)
    : config_(config), kv_(kv), is_eog_(std::move(is_eog)), now_(std::move(now)) {}

Status Scheduler::Validate(int32_t prompt_tokens, const RequestOptions& o) const {
  if (prompt_tokens <= 0) return InvalidArgumentError("the prompt is empty (no tokens)");
  const bool embeds = o.pooling != Pooling::kNone;  // prefill only: no new tokens
  if (embeds && o.n != 1) return InvalidArgumentError("an embedding request has n = 1, got {}", o.n);
  if (!embeds && o.max_tokens < 0)
    return InvalidArgumentError("max_tokens must not be negative, got {}", o.max_tokens);
  if (!embeds && o.max_tokens == 0 && o.n != 1)
    return InvalidArgumentError("a prompt-only request (max_tokens 0) has n = 1, got {}", o.n);
  if (o.n < 1 || o.n > config_.max_num_seqs)
    return InvalidArgumentError("n must be in [1, {}] (the engine's max sequences), got {}", config_.max_num_seqs, o.n);
  const int64_t total = int64_t{prompt_tokens} + (embeds ? 0 : o.max_tokens);
  if (total > config_.max_seq_len)
    return OutOfRangeError("the request needs {} positions ({} prompt + {} new tokens) but the context holds {}",
                           total, prompt_tokens, o.max_tokens, config_.max_seq_len);
  if (Budgeted() && o.n > 1)
    return UnsupportedError(
        "n > 1 (parallel sampling) is not supported with a KV budget (--kv-policy): "
        "eviction compacts blocks in place, so branches cannot share them");
  // A budgeted sequence holds at most its budget plus the positions up to one eviction point
  // (MaxBudgetedBlocks).
  const int64_t slots =
      Budgeted() ? std::min<int64_t>(total, int64_t{config_.kv_budget} + config_.kv_evict_interval) : total;
  // Sliding-window groups hold only a pass's windows (KvCacheManager::SequenceBlocks).
  const int64_t blocks = kv_.SequenceBlocks(slots, config_.max_batch_tokens);
  if (blocks > kv_.num_blocks())
    return ResourceExhaustedError(
        "the request needs {} KV blocks ({} tokens) but the whole KV cache has {}; raise --kv-cache-memory",
        blocks, slots, kv_.num_blocks());
  if (!config_.chunked_prefill && prompt_tokens > config_.max_batch_tokens)
    return InvalidArgumentError("the prompt has {} tokens, more than --max-batch-tokens {} without chunked prefill",
                                prompt_tokens, config_.max_batch_tokens);
  return Status::Ok();
}

void Scheduler::Add(std::unique_ptr<Request> req) {
  Request* r = req.get();
  r->status = RequestStatus::kWaiting;
  ++live_[r->id];
  owned_.emplace(r, std::move(req));
  waiting_.push_back(r);
}

int32_t Scheduler::LiveBranches(RequestId id) const {
  auto it = live_.find(id);
  return it == live_.end() ? 0 : it->second;
}

int32_t Scheduler::RunningSeqs() const {
  int32_t n = 0;
  for (const Request* r : running_) n += Width(*r);
  return n;
}

void Scheduler::Preempt(Request* r) {
  FERRY_CHECK(!running_.empty() && running_.back() == r);
  running_.pop_back();
  kv_.Free(r->kv);
  r->kept.Clear();  // recomputation re-runs the same passes, so it keeps the same tokens
  r->spec.ClearDraft();
  r->spec.proposer.reset();  // the draft's KV too: it is recomputed with the target's
  r->num_computed = 0;  // recompute prompt + generated tokens when readmitted
  r->pooled.Reset();    // an embedding's tokens are pooled again as they are recomputed
  r->status = RequestStatus::kWaiting;
  ++r->num_preemptions;
  ++stats_.preemptions;
  waiting_.push_front(r);
}

int32_t Scheduler::PassLimit(const Request& r, int32_t c) const {
  if (!Budgeted()) return INT32_MAX;
  const int32_t interval = config_.kv_evict_interval;
  const int32_t next =
      c >= r.num_prompt_tokens ? c + 1 : std::min(r.num_prompt_tokens, (c / interval + 1) * interval);
  return next - c;
}

int32_t Scheduler::MaxBudgetedBlocks(const Request& r) const {
  const int64_t total = int64_t{r.num_prompt_tokens} + r.options.max_tokens;
  return kv_.BlocksFor(std::min<int64_t>(total, int64_t{config_.kv_budget} + config_.kv_evict_interval));
}

bool Scheduler::Admit(Request* r, SchedulerOutput& out, int32_t& budget, bool schedule_now) {
  if (Budgeted() && config_.kv_budget_reserve) {
    int64_t reserved = MaxBudgetedBlocks(*r);
    for (const Request* q : running_) reserved += MaxBudgetedBlocks(*q);
    if (reserved > kv_.num_blocks()) return false;
  }
  // Budgeted sequences never share blocks (compaction rewrites them in place); an embedding
  // pools every token's hidden state, which a cached block does not hold.
  // Prompt logprobs too: every prompt position's logits are computed, none served from cache.
  kv::PrefixHit hit =
      Budgeted() || r->embeds() || r->wants_prompt_logprobs() ? kv::PrefixHit{} : kv_.FindPrefix(r->tokens);
  const int32_t start = hit.num_tokens;
  const int32_t pending = r->num_tokens() - start;
  const int32_t n = schedule_now ? std::min({pending, budget, PassLimit(*r, start)}) : 0;
  if (schedule_now && !config_.chunked_prefill && n < pending) return false;
  auto alloc = kv_.AllocateSlots(r->kv, start + n, &hit);
  if (!alloc) return false;
  for (const kv::BlockCopy& c : alloc->copies) out.block_copies.push_back(c);
  r->num_computed = start;
  r->status = RequestStatus::kRunning;
  if (r->times.first_scheduled < 0) r->times.first_scheduled = now_();
  if (r->num_cached_prompt_tokens < 0) {  // first admission: prefix-cache accounting
    r->num_cached_prompt_tokens = std::min(start, r->num_prompt_tokens);
    stats_.prompt_tokens += r->num_prompt_tokens;
    stats_.prefix_query_tokens += r->num_prompt_tokens;
    stats_.prefix_hit_tokens += r->num_cached_prompt_tokens;
  }
  waiting_.pop_front();
  running_.push_back(r);
  if (n > 0) {
    out.scheduled.push_back({r, n, 0, Budgeted() && n == PassLimit(*r, start)});
    out.num_tokens += n;
    budget -= n;
  }
  return true;
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_batch_tokens;
  const size_t max_seqs = static_cast<size_t>(config_.max_num_seqs);

  // Static batching: a new batch only once the previous one has completely finished.
  if (config_.policy == BatchPolicy::kStatic && running_.empty()) {
    while (!waiting_.empty() && RunningSeqs() + Width(*waiting_.front()) <= config_.max_num_seqs)
      if (!Admit(waiting_.front(), out, budget, /*schedule_now=*/false)) break;
  }

  // Running requests first, oldest first: decodes and the next chunk of unfinished prefills.
  bool preempted = false;
  for (size_t i = 0; i < running_.size() && budget > 0 && out.scheduled.size() < max_seqs;) {
    Request* r = running_[i];
    const int32_t limit = PassLimit(*r, r->num_computed);
    const int32_t n = std::min({r->num_pending(), budget, limit});
    if (!config_.chunked_prefill && n < r->num_pending()) {
      ++i;
      continue;
    }
    // Drafts (speculative decoding) ride along when the request reaches its end this step and
    // budget and blocks allow; without room they are dropped rather than preempting anyone.
    int32_t d = n == r->num_pending() ? std::min(static_cast<int32_t>(r->spec.draft.size()), budget - n) : 0;
    std::optional<kv::SlotAllocation> alloc;
    const int32_t stored = StoredSlots(*r);
    if (d > 0 && !(alloc = kv_.AllocateSlots(r->kv, stored + n + d))) d = 0;
    while (!alloc && !(alloc = kv_.AllocateSlots(r->kv, stored + n))) {
      Request* victim = running_.back();  // most recently admitted
      Preempt(victim);
      preempted = true;
      if (victim == r) break;
    }
    if (!alloc) break;  // r itself was preempted: it was the last running request
    for (const kv::BlockCopy& c : alloc->copies) out.block_copies.push_back(c);
    out.scheduled.push_back({r, n, d, Budgeted() && n == limit});
    out.num_tokens += n + d;
    budget -= n + d;
    ++i;
  }

  // Continuous batching: admit waiting requests while budget, sequences and blocks allow.
  if (config_.policy == BatchPolicy::kContinuous && !preempted) {
    while (!waiting_.empty() && budget > 0 && out.scheduled.size() < max_seqs &&
           RunningSeqs() + Width(*waiting_.front()) <= config_.max_num_seqs)
      if (!Admit(waiting_.front(), out, budget, /*schedule_now=*/true)) break;
  }

  if (!out.empty()) {
    ++stats_.steps;
    stats_.kv_waste_sum += KvWaste();
    RecordKvPeaks(out);
    for (const ScheduledRequest& s : out.scheduled) {
      const Request& r = *s.req;
      if (s.num_draft > 0)
        stats_.decode_tokens_computed += s.num_tokens + s.num_draft;
      else if (s.num_tokens == 1 && r.num_output() > 0 && r.num_computed == r.num_tokens() - 1)
        ++stats_.decode_tokens_computed;
      else
        stats_.prefill_tokens_computed += s.num_tokens;
    }
  }
  return out;
}

void Scheduler::RecordKvPeaks(const SchedulerOutput& out) {
  // Full caches would hold every position computed so far plus this step's, per sequence.
  std::unordered_map<const Request*, int32_t> positions;
  for (const Request* r : running_) positions[r] = r->num_computed;
  for (const ScheduledRequest& s : out.scheduled) positions[s.req] += s.num_tokens + s.num_draft;
  int64_t full = 0;  // every group's table covering every position
  for (const auto& [r, p] : positions) full += int64_t{kv_.BlocksFor(p)} * kv_.num_groups();
  stats_.kv_peak_blocks = std::max<int64_t>(stats_.kv_peak_blocks, kv_.num_blocks() - kv_.NumFreeBlocks());
  stats_.kv_peak_full_blocks = std::max(stats_.kv_peak_full_blocks, full);
  stats_.peak_running = std::max<int64_t>(stats_.peak_running, RunningSeqs());
  stats_.running_sum += RunningSeqs();
}

double Scheduler::KvWaste() const {
  // Distinct physical blocks of running requests and how many of their slots hold a token.
  const int32_t bs = kv_.block_size();
  std::unordered_map<kv::BlockId, int32_t> fill;
  for (const Request* r : running_) {
    for (int32_t g = 0; g < r->kv.num_groups(); ++g) {
      const auto& blocks = r->kv.blocks(g);
      for (size_t b = 0; b < blocks.size(); ++b) {
        if (blocks[b] < 0) continue;  // left a sliding window: back in the pool
        const int32_t used = std::clamp(r->kv.num_slots() - static_cast<int32_t>(b) * bs, 0, bs);
        int32_t& f = fill[blocks[b]];
        f = std::max(f, used);
      }
    }
  }
  if (fill.empty()) return 0.0;
  int64_t used = 0;
  for (const auto& [block, f] : fill) used += f;
  const int64_t allocated = static_cast<int64_t>(fill.size()) * bs;
  return static_cast<double>(allocated - used) / static_cast<double>(allocated);
}

std::unique_ptr<Request> Scheduler::Fork(Request& parent, size_t branch) {
  auto child = std::make_unique<Request>(parent.id, static_cast<int32_t>(branch), parent.tokens, parent.options,
                                         std::move(parent.fork_samplers[branch - 1]));
  child->num_prompt_tokens = parent.num_prompt_tokens;
  child->num_computed = parent.num_computed;
  child->status = RequestStatus::kRunning;
  child->kv = kv_.Fork(parent.kv);
  child->times = parent.times;
  child->num_cached_prompt_tokens = parent.num_cached_prompt_tokens;
  child->prompt_logprobs = parent.prompt_logprobs;  // each branch's first output carries them
  child->spec.Enable(parent.spec.max_k, parent.spec.adaptive);
  return child;
}

void Scheduler::AppendToken(Request* r, int32_t token, double now, std::vector<SeqEvent>& events,
                            TokenLogprobs logprobs) {
  const std::vector<int32_t>& stop_ids = r->options.stop_token_ids;
  if ((!r->options.ignore_eos && is_eog_ && is_eog_(token)) ||
      std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    Retire(r, RequestStatus::kFinishedStop);
    events.push_back({r, -1, {}});
    return;
  }
  r->tokens.push_back(token);
  RequestTimes& t = r->times;
  if (t.first_token < 0) {
    t.first_token = now;
  } else {
    t.inter_token.push_back(now - t.last_token);
  }
  t.last_token = now;
  ++stats_.output_tokens;
  events.push_back({r, token, std::move(logprobs)});
  if (r->num_output() >= r->options.max_tokens || r->num_tokens() >= config_.max_seq_len)
    Retire(r, RequestStatus::kFinishedLength);
}

std::vector<SeqEvent> Scheduler::Update(const SchedulerOutput& out, const RunnerOutput& result) {
  FERRY_CHECK(result.sampled.size() == out.scheduled.size());
  const double now = now_();
  std::vector<SeqEvent> events;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    Request* r = out.scheduled[i].req;
    FERRY_CHECK(r->status == RequestStatus::kRunning);
    const std::vector<int32_t>& sampled = result.sampled[i];
    if (const int32_t drafted = out.scheduled[i].num_draft; drafted > 0) {
      // Speculative step: the accepted drafts' K/V stay, the rejected ones' are rolled back.
      const int32_t accepted = result.num_accepted[i];
      FERRY_CHECK(accepted >= 0 && accepted <= drafted &&
                  sampled.size() == static_cast<size_t>(accepted) + 1);
      r->num_computed += out.scheduled[i].num_tokens + accepted;
      kv_.Truncate(r->kv, r->num_computed);
      r->spec.OnVerified(drafted, accepted);
      ++stats_.spec_verifications;
      stats_.spec_draft_tokens += drafted;
      stats_.spec_accepted_tokens += accepted;
      for (int32_t token : sampled) {
        AppendToken(r, token, now, events);
        if (IsFinished(r->status)) break;
      }
      if (!IsFinished(r->status)) {
        kv_.CacheFullBlocks(r->kv, r->tokens, r->num_computed);
        ReleaseOutOfWindow(r);
      }
      continue;
    }
    r->num_computed += out.scheduled[i].num_tokens;
    if (Budgeted() && r->kv.num_slots() > r->kept.size()) {
      // The runner evicted and compacted: the blocks past the kept tokens go back to the pool.
      stats_.kv_evicted_tokens += r->kv.num_slots() - r->kept.size();
      kv_.Truncate(r->kv, r->kept.size());
    }
    if (!r->embeds()) kv_.CacheFullBlocks(r->kv, r->tokens, r->num_computed);  // embeddings' are freed
    ReleaseOutOfWindow(r);  // after caching them: released blocks stay reusable by a later prefix
    if (r->prefill_only()) {
      if (r->num_computed == r->num_tokens()) {
        Retire(r, r->embeds() ? RequestStatus::kFinishedStop : RequestStatus::kFinishedLength);
        events.push_back({r, -1, {}});
      }
      continue;
    }
    if (sampled.empty()) continue;  // a prefill chunk short of the end
    // Fork before the parent's first token: the branches share everything computed so far.
    std::vector<Request*> kids;
    if (!r->fork_samplers.empty()) {
      FERRY_CHECK(sampled.size() == r->fork_samplers.size() + 1);
      for (size_t b = 1; b < sampled.size(); ++b) {
        std::unique_ptr<Request> kid = Fork(*r, b);
        kids.push_back(kid.get());
        running_.push_back(kid.get());
        ++live_[r->id];
        owned_.emplace(kid.get(), std::move(kid));
      }
      r->fork_samplers.clear();
    }
    auto lp = [&](size_t b) {
      return i < result.logprobs.size() && b < result.logprobs[i].size() ? result.logprobs[i][b]
                                                                         : TokenLogprobs{};
    };
    AppendToken(r, sampled[0], now, events, lp(0));
    for (size_t b = 0; b < kids.size(); ++b) AppendToken(kids[b], sampled[b + 1], now, events, lp(b + 1));
  }
  return events;
}

void Scheduler::ReleaseOutOfWindow(Request* r) {
  stats_.kv_window_released_blocks += kv_.ReleaseOutOfWindow(r->kv, r->num_computed);
}

void Scheduler::Retire(Request* r, RequestStatus why) {
  FERRY_CHECK(!IsFinished(r->status));
  if (r->status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), r));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r));
  }
  r->status = why;
  r->fork_samplers.clear();  // an unforked parent ends its would-be branches with it
  kv_.Free(r->kv);
  ++(why == RequestStatus::kFinishedAbort ? stats_.aborted : stats_.finished);
  if (--live_[r->id] == 0) live_.erase(r->id);
  auto it = owned_.find(r);
  FERRY_CHECK(it != owned_.end());
  finished_.push_back(std::move(it->second));
  owned_.erase(it);
}

void Scheduler::Finish(Request* req, RequestStatus why) {
  if (!IsFinished(req->status)) Retire(req, why);
}

void Scheduler::Abort(RequestId id) {
  std::vector<Request*> victims;
  for (const auto& [ptr, req] : owned_)
    if (req->id == id) victims.push_back(req.get());
  for (Request* r : victims) Retire(r, RequestStatus::kFinishedAbort);
}

std::vector<std::unique_ptr<Request>> Scheduler::TakeFinished() {
  std::vector<std::unique_ptr<Request>> out;
  out.swap(finished_);
  return out;
}

}  // namespace ferry
