// EngineCore: the serving engine's state and its step, single-threaded:
// Schedule() -> ModelRunner::Execute() -> Scheduler::Update() -> OutputProcessor.
// Engine (engine.h) runs it on a loop thread; tests and benchmarks may drive it directly.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "base/timer.h"
#include "comm/communicator.h"
#include "core/thread_pool.h"
#include "engine/engine_metrics.h"
#include "engine/follower.h"
#include "engine/micro_batches.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/prefix_tiers.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_budget_policy.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"
#include "speculative/proposer.h"
#include "speculative/spec_config.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

struct EngineConfig {
  int32_t block_size = 16;  // tokens per KV block
  int32_t num_blocks = 0;   // 0: as many as kv_cache_bytes holds
  size_t kv_cache_bytes = size_t{1} << 30;
  bool prefix_caching = true;
  SchedulerConfig scheduler;  // scheduler.max_seq_len 0: the model's training context
  int32_t threads = 0;        // 0: physical cores
  spec::SpecConfig spec;      // speculative decoding (off unless a proposer is set)
  // KV budget per sequence (docs/sparsity.md); nullopt: the model's --kv-policy/--kv-budget
  // (Model::sparsity()). Budgeted engines run without prefix caching, forks or speculation.
  std::optional<KvBudgetConfig> kv_budget;
  KvCacheTypes kv_types;  // K/V storage types of the paged cache (and a draft model's)
  // Sliding-window layers get KV groups of their own whose blocks go back to the pool as they
  // leave the window (model/kv_group_layout.h). false: one table for every layer, every block
  // kept (tests compare the two); also so with a KV budget.
  bool free_sliding_window_blocks = true;
  // Run-time sparsity of this engine (docs/sparsity.md); nullopt: the options the model was
  // loaded with. Head pruning and FFN sparsity must match the model's (built at load).
  std::optional<SparsityOptions> sparsity;
  // The prefix cache's RAM and disk tiers for blocks the pool evicts (off unless ram_bytes or
  // disk_dir is set). prefix_tiers.fingerprint is the model file's (kv::FingerprintFile); the
  // engine mixes in the KV layout.
  kv::PrefixTierConfig prefix_tiers;
  // Under mpirun with the model split over ranks (model/parallel.h): the job's world. This
  // engine runs on its rank 0 and leads the other ranks, which run RunFollower
  // (engine/follower.h); null or a world of one: nothing to lead.
  comm::Communicator* followers = nullptr;
  // How each step's batch is cut when the model is split into pipeline stages
  // (engine/micro_batches.h); unused otherwise.
  MicroBatchConfig micro_batches;
  double follower_heartbeat_s = 1;  // the longest an idle rank 0 stays silent (< --comm-timeout)
  // Engine (engine.h) only: called on the loop thread when a step fails, before the loop stops
  // (a split job ends itself there: its other ranks cannot go on without rank 0's steps).
  std::function<void(const Status&)> on_loop_failure;
};

class EngineCore {
 public:
  // `model` and `tokenizer` (may be null: token ids only) must outlive the engine.
  static StatusOr<std::unique_ptr<EngineCore>> Create(const Model& model, const Tokenizer* tokenizer,
                                                      const EngineConfig& config);
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Checks that a request can ever run (any thread: reads only immutable configuration).
  Status Validate(const std::vector<int32_t>& prompt, const RequestOptions& options) const;
  // Queues a validated request; arrival is on Now()'s clock.
  void Add(RequestId id, std::vector<int32_t> prompt, const RequestOptions& options, double arrival);
  void Abort(RequestId id);
  // One iteration; returns the outputs it produced (also those of aborted requests).
  StatusOr<std::vector<RequestOutput>> Step();

  bool HasWork() const { return scheduler_->HasWork(); }
  // Whether the engine leads follower ranks; they need a heartbeat when it is idle.
  bool leads_followers() const { return leader_ != nullptr; }
  double follower_heartbeat_s() const { return leader_ ? leader_->heartbeat_s() : 0; }
  // A heartbeat to the followers when nothing was sent to them for the heartbeat interval.
  Status KeepFollowersAlive() { return leader_ ? leader_->KeepAlive() : Status::Ok(); }
  EngineStats Stats() const;
  // The work the model's sparsity options skipped in this engine's steps.
  const SparsityStats& sparsity_stats() const;
  double Now() const { return clock_.Seconds(); }  // seconds since creation (any thread)
  int32_t num_blocks() const { return kv_->num_blocks(); }
  const SchedulerConfig& scheduler_config() const { return scheduler_->config(); }
  const kv::KvCacheManager& kv_manager() const { return *kv_; }
  // Running requests in admission order (tests check their block tables).
  const std::vector<Request*>& running() const { return scheduler_->running(); }
  // The speculative-decoding proposer, or null when the engine does not speculate.
  const spec::Proposer* proposer() const { return proposer_.get(); }

 private:
  EngineCore() = default;
  // Drafts for every running request that decodes this step and speculates.
  Status Propose();

  const Model* model_ = nullptr;
  const Tokenizer* tok_ = nullptr;
  Timer clock_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PagedKvCache> cache_;
  size_t kv_block_bytes_ = 0;                        // one block of one KV group's layers
  std::unique_ptr<kv::TieredBlockStore> tiers_;      // before kv_, which holds pointers to both
  std::unique_ptr<kv::BlockContent> block_content_;  // over split ranks it reads through leader_
  std::unique_ptr<kv::KvCacheManager> kv_;
  spec::SpecConfig spec_config_;
  std::unique_ptr<spec::Proposer> proposer_;  // before scheduler_: requests hold draft-KV leases
  double spec_draft_s_ = 0, spec_verify_s_ = 0;
  std::unique_ptr<Scheduler> scheduler_;  // after kv_: its requests' leases return blocks to kv_
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputProcessor> output_;
  std::unique_ptr<StepLeader> leader_;  // last: destroyed first, it stops the followers
};

}  // namespace ferry
