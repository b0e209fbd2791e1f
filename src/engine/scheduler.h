// Scheduler: iteration-level (continuous) batching. Each step it catches every running
// request's computed tokens up towards its total under a token budget (decodes and prefill
// chunks together), admits waiting requests while blocks and budget allow, and preempts the
// most recently admitted request by recomputation when blocks run out. Update() commits a
// step's results: tokens, cached full blocks, forks, finishes.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/engine_metrics.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"
#include "sampling/logprobs.h"

namespace ferry {

enum class BatchPolicy {
  kContinuous,  // admit whenever there is room; finished requests free their slot at once
  kStatic,      // admit a batch only when none is running; it runs until its last member ends
};

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;  // tokens computed per step (decodes + prefill chunks)
  int32_t max_num_seqs = 64;       // sequences per step
  int32_t max_seq_len = 2048;      // positions a sequence may reach
  bool chunked_prefill = true;     // split prompts over steps so decodes never wait for them
  BatchPolicy policy = BatchPolicy::kContinuous;
  // KV budget per sequence (model/kv_budget_policy.h; 0: off). A budgeted sequence's blocks
  // hold its kept tokens, not its positions, and it is cut back to kv_budget tokens at its
  // eviction points: every kv_evict_interval positions of its prompt and after every token
  // past the prompt. No pass crosses an eviction point, so what a sequence keeps depends on
  // its tokens only, never on the batch or on how the token budget split its prefill.
  int32_t kv_budget = 0;
  int32_t kv_evict_interval = 0;
  // A budgeted sequence never holds more than budget + interval slots, so admission can
  // reserve that bound: a budgeted request is admitted only while the running requests'
  // bounds and its own fit the pool, and then nobody is ever preempted. false: admit on the
  // first chunk's blocks like unbudgeted requests (preemption possible; tests use it).
  bool kv_budget_reserve = true;
};

struct ScheduledRequest {
  Request* req;
  int32_t num_tokens;     // computes tokens [req->num_computed, + num_tokens)
  int32_t num_draft = 0;  // then req->spec.draft[0, num_draft) at the following positions
  bool evict = false;     // a budgeted request reaches an eviction point with this pass
  bool WantsLogits() const { return req->num_computed + num_tokens == req->num_tokens(); }
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  std::vector<kv::BlockCopy> block_copies;  // to apply before the forward pass
  int32_t num_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

// What the model runner produced for scheduled[i]: sampled token(s), empty for a prefill
// chunk that does not reach the end. A first sample of a request with n > 1 has n tokens.
// With drafts, sampled holds the accepted drafts then the target's own token, and
// num_accepted how many drafts were accepted.
struct RunnerOutput {
  std::vector<std::vector<int32_t>> sampled;
  std::vector<int32_t> num_accepted;  // [scheduled] (empty: no drafts this step)
  // Parallel to `sampled`, filled for requests with options.logprobs >= 0 (else empty).
  std::vector<std::vector<TokenLogprobs>> logprobs;
};

// One emitted token (or a finish) of one branch after a step.
struct SeqEvent {
  Request* req;
  int32_t token = -1;      // -1: no new token (e.g. finished on end-of-generation)
  TokenLogprobs logprobs;  // of `token`, when its request asked for them
};

class Scheduler {
 public:
  // is_eog: end-of-generation token predicate. `now` gives the engine clock in seconds.
  Scheduler(const SchedulerConfig& config, kv::KvCacheManager& kv, std::function<bool(int32_t)> is_eog,
            std::function<double()> now);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerConfig& config() const { return config_; }

  // Whether a request of this prompt length can ever run; an error says why not.
  Status Validate(int32_t prompt_tokens, const RequestOptions& options) const;
  void Add(std::unique_ptr<Request> req);
  // Finishes every branch of `id` (waiting or running) and frees its blocks.
  void Abort(RequestId id);
  // Finishes one branch (e.g. a stop string matched) and frees its blocks at once.
  void Finish(Request* req, RequestStatus why);

  SchedulerOutput Schedule();
  std::vector<SeqEvent> Update(const SchedulerOutput& out, const RunnerOutput& result);
  // Finished branches since the last call (each reported once, then destroyed by the caller).
  std::vector<std::unique_ptr<Request>> TakeFinished();

  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }
  // Branches of `id` not finished yet (0: the whole request is done).
  int32_t LiveBranches(RequestId id) const;
  // Running requests in admission order (the engine drafts for them before Schedule()).
  const std::vector<Request*>& running() const { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  const EngineStats& stats() const { return stats_; }
  // Allocated-but-unused token slots / allocated slots over the blocks of running requests.
  double KvWaste() const;

 private:
  void Preempt(Request* r);
  bool Budgeted() const { return config_.kv_budget > 0; }
  // Slots r's blocks hold before its next pass: its kept tokens (budgeted) or its positions.
  int32_t StoredSlots(const Request& r) const { return Budgeted() ? r.kept.size() : r.num_computed; }
  // Tokens r may compute in a pass starting at position `computed`: up to its next eviction
  // point when budgeted.
  int32_t PassLimit(const Request& r, int32_t computed) const;
  // The most blocks a budgeted request can ever hold.
  int32_t MaxBudgetedBlocks(const Request& r) const;
  // Counts what this step's blocks hold against what caches of every position would.
  void RecordKvPeaks(const SchedulerOutput& out);
  int32_t RunningSeqs() const;  // running branches, counting unforked branches of parents
  bool Admit(Request* r, SchedulerOutput& out, int32_t& budget, bool schedule_now);
  void AppendToken(Request* r, int32_t token, double now, std::vector<SeqEvent>& events,
                   TokenLogprobs logprobs = {});
  std::unique_ptr<Request> Fork(Request& parent, size_t branch);
  void Retire(Request* r, RequestStatus why);
  // Gives back r's sliding-window blocks its next pass (from r->num_computed) no longer reads.
  void ReleaseOutOfWindow(Request* r);

  SchedulerConfig config_;
  kv::KvCacheManager& kv_;
  std::function<bool(int32_t)> is_eog_;
  std::function<double()> now_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order (oldest first)
  std::unordered_map<const Request*, std::unique_ptr<Request>> owned_;
  std::vector<std::unique_ptr<Request>> finished_;
  std::unordered_map<RequestId, int32_t> live_;  // unfinished branches per request
  EngineStats stats_;
};

}  // namespace ferry
