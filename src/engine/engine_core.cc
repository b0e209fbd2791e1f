#include "engine/engine_core.h"

#include <algorithm>

#include "base/log.h"
#include "speculative/create_proposer.h"

namespace ferry {

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(const Model& model, const Tokenizer* tokenizer,
                                                         const EngineConfig& config) {
  const ModelConfig& mc = model.config();
  if (config.block_size <= 0) return InvalidArgumentError("the KV block size must be positive");
  if (config.scheduler.max_batch_tokens <= 0)
    return InvalidArgumentError("--max-batch-tokens must be positive");
  if (config.scheduler.max_num_seqs <= 0) return InvalidArgumentError("--max-num-seqs must be positive");
  // Before sizing blocks in them; with the model's layout (a latent cache stores no V).
  FERRY_ASSIGN_OR_RETURN(const KvCacheTypes kv_types, KvCacheTypesFor(mc, config.kv_types));

  std::optional<KvBudgetConfig> budget = config.kv_budget;
  if (!budget) {
    FERRY_ASSIGN_OR_RETURN(budget,
                           KvBudgetFromOptions(config.sparsity ? *config.sparsity : model.sparsity()));
  } else if (budget->policy == KvPolicy::kFull) {
    budget.reset();
  }
  bool prefix_caching = config.prefix_caching;
  SchedulerConfig sc = config.scheduler;
  if (budget) {
    FERRY_RETURN_IF_ERROR(budget->Validate());
    if (config.spec.enabled())
      return UnsupportedError("speculative decoding is not supported with --kv-policy {} (a KV budget)",
                              KvPolicyName(budget->policy));
    if (!sc.chunked_prefill)
      return UnsupportedError("--kv-policy {} needs chunked prefill (passes stop at eviction points)",
                              KvPolicyName(budget->policy));
    if (sc.kv_evict_interval <= 0) sc.kv_evict_interval = sc.max_batch_tokens;
    sc.kv_budget = budget->budget;
    // Compaction rewrites a budgeted sequence's blocks in place: nothing to share or reuse.
    if (prefix_caching)
      Log(LogLevel::kInfo,
          "prefix caching is off with --kv-policy {} (budgeted blocks are compacted in place)",
          KvPolicyName(budget->policy));
    prefix_caching = false;
  } else {
    sc.kv_budget = 0;
  }

  const bool leads = config.followers != nullptr && config.followers->size() > 1;
  if (leads) {  // what rank 0 decides alone that the followers would also need is refused
    if (config.followers->rank() != 0)
      return InternalError("the engine runs on rank 0 of the world it leads, not rank {}",
                           config.followers->rank());
    if (budget)
      return UnsupportedError(
          "--kv-policy {} (a KV budget) is not supported over split ranks (--tensor-parallel, "
          "--pipeline-parallel): evictions "
          "would have to reach every rank's KV shard",
          KvPolicyName(budget->policy));
    if (config.sparsity && !config.sparsity->OnlyMoeCapacity())
      return UnsupportedError(
          "sparsity options are not supported over split ranks (--tensor-parallel, --pipeline-parallel)");
    if (!(config.follower_heartbeat_s > 0))
      return InvalidArgumentError("the follower heartbeat must be positive seconds (got {})",
                                  config.follower_heartbeat_s);
  }
  if (sc.max_seq_len <= 0) sc.max_seq_len = mc.n_ctx_train;
  // Sliding layers in KV groups of their own, whose blocks go back as they leave the window
  // (over split ranks too: the step plan carries a table per slot and group; the prefix tiers
  // keep blocks of one group's layers). Not with a KV budget (which sliding models refuse).
  KvGroupLayout groups = KvGroupLayout::Single(mc.n_layers);
  if (config.free_sliding_window_blocks && !budget)
    groups = KvGroupLayout::ForModel(mc, sc.max_seq_len);
  else if (KvGroupLayout::ForModel(mc, sc.max_seq_len).num_groups() > 1)
    Log(LogLevel::kInfo, "{}: the sliding-window layers keep every KV block (not only the window) with {}",
        mc.arch, budget ? "a KV budget" : "freeing turned off");
  // A pipeline stage's cache holds its layers only; the followers check the model's layout and
  // hold their own stages' layers. Rank 0's stage is the first, which has the most layers, so
  // every rank's blocks fit the memory asked for.
  const int32_t model_layers_per_group = groups.layers_per_group;
  const StageLayers stage = model.stage_layers();
  groups = groups.ForStage(stage.first, stage.last);
  const size_t block_bytes = PagedKvCache::BlockBytes(groups.layers_per_group, config.block_size,
                                                      mc.n_kv_heads, mc.head_dim, kv_types);
  int64_t num_blocks = config.num_blocks;
  if (num_blocks <= 0) num_blocks = static_cast<int64_t>(config.kv_cache_bytes / block_bytes);
  if (num_blocks <= 0)
    return InvalidArgumentError(
        "the KV cache memory ({} bytes) holds no {}-token block; raise --kv-cache-memory",
        config.kv_cache_bytes, config.block_size);
  if (num_blocks > (int64_t{1} << 30)) return InvalidArgumentError("too many KV blocks ({})", num_blocks);

  std::unique_ptr<EngineCore> e(new EngineCore());
  e->model_ = &model;
  e->tok_ = tokenizer;
  e->kv_block_bytes_ = block_bytes;
  const std::vector<int32_t> group_windows = groups.windows;
  const int64_t layers_per_block = groups.layers_per_group;
  const int32_t num_groups = groups.num_groups();
  FERRY_ASSIGN_OR_RETURN(
      PagedKvCache cache,
      PagedKvCache::Create(mc.n_layers, static_cast<int32_t>(num_blocks), config.block_size, mc.n_kv_heads,
                           mc.head_dim, sc.max_num_seqs, sc.max_seq_len, kv_types, std::move(groups)));
  e->cache_ = std::make_unique<PagedKvCache>(std::move(cache));
  e->pool_ = std::make_unique<ThreadPool>(config.threads);
  e->kv_ = std::make_unique<kv::KvCacheManager>(
      kv::KvCacheConfig{static_cast<int32_t>(num_blocks), config.block_size, prefix_caching, group_windows});
  if (leads) {  // the followers allocate their shards now: the tiers' probe and block transfers need them
    e->leader_ = std::make_unique<StepLeader>(*config.followers, config.follower_heartbeat_s);
    FERRY_RETURN_IF_ERROR(e->leader_->Start(
        FollowerCacheShape{static_cast<int32_t>(num_blocks), config.block_size, sc.max_num_seqs,
                           sc.max_seq_len, kv_types, num_groups, model_layers_per_group},
        e->cache_->BlockContentBytes()));
  }
  if (config.prefix_tiers.enabled()) {
    if (!prefix_caching)
      return InvalidArgumentError(
          "--prefix-cache-ram/--prefix-cache-dir keep prefix-cache blocks: they need prefix caching (drop "
          "--no-prefix-caching{})",
          budget ? " and --kv-policy" : "");
    // Over split ranks the tiers keep whole blocks on rank 0: every rank's share, rank 0's first.
    if (leads) {
      e->block_content_ = std::make_unique<SplitBlockContent>(*e->cache_, *e->leader_);
    } else {
      e->block_content_ = std::make_unique<PagedBlockContent>(*e->cache_);
    }
    const size_t block_bytes = e->block_content_->BlockBytes();
    kv::PrefixTierConfig tc = config.prefix_tiers;
    tc.fingerprint = PrefixTierFingerprint(tc.fingerprint, mc, kv_types, config.block_size, block_bytes,
                                           leads ? config.followers->size() : 1, model.pipeline_stages());
    FERRY_ASSIGN_OR_RETURN(e->tiers_, kv::TieredBlockStore::Create(tc));
    e->kv_->AttachTiers(e->tiers_.get(), e->block_content_.get());
    Log(LogLevel::kInfo, "prefix cache tiers: RAM {} MiB ({} blocks of {} KiB){}", tc.ram_bytes >> 20,
        tc.ram_bytes / block_bytes, block_bytes >> 10,
        tc.disk_dir.empty() ? std::string()
                            : fmt::format(", disk {} ({} MiB at most)", tc.disk_dir, tc.disk_bytes >> 20));
    if (e->tiers_->has_disk() && tc.price_disk) {
      FERRY_ASSIGN_OR_RETURN(kv::DiskCostModel cost,
                             MeasureDiskCost(model, *e->cache_, e->pool_.get(), e->leader_.get(), block_bytes,
                                             tc.disk_dir, sc.max_seq_len));
      e->tiers_->SetDiskCost(cost);
      Log(LogLevel::kInfo,
          "prefix cache disk tier {}: a block reads back in {:.1f} us, recomputes in {:.1f} us + {:.2f} us "
          "per earlier block (its layers' share: {:.3f}); blocks cheaper to recompute stay off disk",
          tc.disk_dir, cost.read_s * 1e6, cost.recompute_base_s * 1e6, cost.recompute_per_depth_s * 1e6,
          cost.recompute_share);
    }
  }
  std::function<bool(int32_t)> is_eog;
  if (tokenizer) is_eog = [tokenizer](int32_t id) { return tokenizer->IsEog(id); };
  EngineCore* self = e.get();
  e->scheduler_ = std::make_unique<Scheduler>(sc, *e->kv_, std::move(is_eog), [self] { return self->Now(); });
  e->spec_config_ = config.spec;
  // The draft model's cache keeps every block: as many as the target's bytes make blocks of
  // every layer (the target's count when it has one KV group).
  const int32_t draft_blocks =
      static_cast<int32_t>(std::max<int64_t>(1, num_blocks * layers_per_block / mc.n_layers));
  FERRY_ASSIGN_OR_RETURN(
      e->proposer_, spec::CreateProposer(config.spec, mc,
                                         spec::DraftKvConfig{draft_blocks, config.block_size, sc.max_num_seqs,
                                                             sc.max_seq_len, kv_types},
                                         e->pool_.get()));
  e->runner_ = std::make_unique<ModelRunner>(model, *e->cache_, e->pool_.get(),
                                             config.sparsity ? *config.sparsity : model.sparsity(), budget,
                                             config.micro_batches);
  e->output_ = std::make_unique<OutputProcessor>(tokenizer);
  if (leads) e->runner_->LeadFollowers(e->leader_.get());
  return e;
}

Status EngineCore::Validate(const std::vector<int32_t>& prompt, const RequestOptions& options) const {
  const int32_t n_vocab = model_->config().n_vocab;
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab)
      return InvalidArgumentError("prompt token id {} is outside the vocabulary [0, {})", t, n_vocab);
  if (!options.stop.empty() && !tok_) return InvalidArgumentError("stop strings need a tokenizer");
  if (options.pooling != Pooling::kNone && !model_->WritesHidden())
    return UnsupportedError("embeddings are not supported for the {} architecture (no hidden states)",
                            model_->config().arch);
  if (options.spec_tokens > 32)
    return InvalidArgumentError("spec_tokens must be at most 32 (draft tokens per step), got {}",
                                options.spec_tokens);
  return scheduler_->Validate(static_cast<int32_t>(prompt.size()), options);
}

void EngineCore::Add(RequestId id, std::vector<int32_t> prompt, const RequestOptions& options,
                     double arrival) {
  const int32_t n_vocab = model_->config().n_vocab;
  auto req = std::make_unique<Request>(id, 0, std::move(prompt), options, Sampler(options.sampling, n_vocab));
  // Branch b samples with seed + b (a fixed seed), like an independent request with that seed.
  for (int32_t b = 1; b < options.n; ++b) {
    SamplingParams p = options.sampling;
    if (p.seed != SamplingParams{}.seed) p.seed += static_cast<uint64_t>(b);
    req->fork_samplers.emplace_back(p, n_vocab);
  }
  // A request that asks for logprobs decodes plainly: verification samples from adjusted
  // distributions, and every token's raw logprobs come from the plain sampling path.
  if (proposer_ && options.logprobs < 0 && options.pooling == Pooling::kNone)
    req->spec.Enable(options.spec_tokens < 0 ? spec_config_.num_tokens : options.spec_tokens,
                     spec_config_.adaptive);
  req->times.arrival = arrival;
  scheduler_->Add(std::move(req));
}

void EngineCore::Abort(RequestId id) {
  scheduler_->Abort(id);
}

StatusOr<std::vector<RequestOutput>> EngineCore::Step() {
  std::vector<RequestOutput> outputs;
  if (proposer_) FERRY_RETURN_IF_ERROR(Propose());
  SchedulerOutput sched = scheduler_->Schedule();
  if (!sched.empty()) {
    bool verifies = false;
    for (const ScheduledRequest& s : sched.scheduled) verifies |= s.num_draft > 0;
    Timer verify_timer;
    FERRY_ASSIGN_OR_RETURN(RunnerOutput result, runner_->Execute(sched));
    if (verifies) spec_verify_s_ += verify_timer.Seconds();
    std::vector<SeqEvent> events = scheduler_->Update(sched, result);
    // Roll the draft's state back to what the target accepted (its KV blocks return now).
    if (verifies)
      for (const ScheduledRequest& s : sched.scheduled)
        if (s.num_draft > 0 && !IsFinished(s.req->status)) proposer_->Rollback(s.req->spec, s.req->tokens);
    output_->Process(events, *scheduler_, outputs);
  }
  output_->Finalize(scheduler_->TakeFinished(), *scheduler_, outputs);
  FERRY_RETURN_IF_ERROR(KeepFollowersAlive());  // a step that ran nothing sent them nothing
  return outputs;
}

Status EngineCore::Propose() {
  Timer timer;
  const int32_t max_seq_len = scheduler_->config().max_seq_len;
  std::vector<spec::ProposeRequest> requests;
  for (Request* r : scheduler_->running()) {
    r->spec.ClearDraft();
    // Only single-token decodes speculate (not prefill chunks, not a parent before its fork).
    if (r->spec.max_k <= 0 || r->num_pending() != 1 || r->num_output() == 0 || !r->fork_samplers.empty())
      continue;
    if (!r->spec.ShouldDraft()) continue;
    // Room: every accepted draft plus one token must fit the output and the context.
    const int32_t room = std::min(r->options.max_tokens - r->num_output(), max_seq_len - r->num_tokens()) - 1;
    if (room > 0) requests.push_back({r->tokens, &r->sampler, &r->spec, room});
  }
  if (requests.empty()) return Status::Ok();
  FERRY_RETURN_IF_ERROR(proposer_->Propose(requests));
  spec_draft_s_ += timer.Seconds();
  return Status::Ok();
}

const SparsityStats& EngineCore::sparsity_stats() const {
  return runner_->sparsity_stats();
}

EngineStats EngineCore::Stats() const {
  EngineStats s = scheduler_->stats();
  s.spec_draft_s = spec_draft_s_;
  s.spec_verify_s = spec_verify_s_;
  s.micro_batches = runner_->micro_batches_run();
  s.running = scheduler_->num_running();
  s.waiting = scheduler_->num_waiting();
  s.kv_usage = kv_->Usage();
  s.kv_blocks = kv_->num_blocks();
  s.kv_groups = kv_->num_groups();
  s.kv_block_bytes = static_cast<int64_t>(kv_block_bytes_);
  s.kv_max_len_blocks = kv_->SequenceBlocks(scheduler_->config().max_seq_len, 1);
  s.kv_free_blocks = kv_->NumFreeBlocks();
  if (tiers_) {
    const kv::TierStats t = tiers_->stats();
    s.prefix_cache_ram_bytes = static_cast<int64_t>(t.ram_bytes);
    s.prefix_cache_disk_bytes = static_cast<int64_t>(t.disk_bytes);
    s.prefix_cache_disk_rejected = t.disk_rejected;
  }
  s.prefix_cache_ram_hits = kv_->RestoredBlocks(kv::BlockTier::kRam);
  s.prefix_cache_disk_hits = kv_->RestoredBlocks(kv::BlockTier::kDisk);
  return s;
}

}  // namespace ferry
