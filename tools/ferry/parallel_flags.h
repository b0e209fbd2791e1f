// --tensor-parallel / --pipeline-parallel / --comm-timeout for the commands that can run split
// over MPI ranks (run, ppl, bench, serve, bench throughput; docs/scaling.md). run/ppl/bench: every
// rank runs the same command on the same inputs and gets the same logits, so sampling agrees
// everywhere; only world rank 0 prints. serve/bench throughput: rank 0 runs the serving engine
// and the other ranks follow its steps (engine/follower.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "comm/process_groups.h"
#include "engine/engine_core.h"
#include "engine/micro_batches.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace ferry::cli {

struct ParallelFlags {
  int tensor_parallel = 1, pipeline_parallel = 1;
  double comm_timeout_s = 60;
  MicroBatchConfig micro_batches;  // the serving engine's steps over pipeline stages
  void Add(CLI::App* cmd);
  // serve / bench throughput: --pipeline-micro-batch-tokens, --pipeline-micro-batches.
  void AddMicroBatches(CLI::App* cmd);
  // The job's groups for these flags (one local rank without mpirun); a layout that does not
  // match the job's size is an error on every rank, before anything waits on a peer.
  StatusOr<comm::ProcessGroups> Open() const;
};

struct ParallelRun {
  comm::ProcessGroups groups;
  double comm_timeout_s = 60;
  MicroBatchConfig micro_batches;
  bool root() const { return groups.world->rank() == 0; }
  bool split() const { return groups.world->size() > 1; }
  ParallelLayout layout() const { return {groups.tp.get(), groups.pp.get()}; }
  // Seconds this rank spent in communication so far (waiting for slower ranks included).
  double comm_seconds() const { return groups.tp->stats().seconds + groups.pp->stats().seconds; }
  // One stderr line per rank when split: its place, weights and KV cache bytes per token.
  void PrintRankMemory(const Model& model, const KvCacheTypes& kv_types) const;
  // Rank 0's seed for every rank (sampling must agree); `seed` as given when fixed.
  StatusOr<uint64_t> AgreeOnSeed(uint64_t seed) const;
  // Prints the failure (with the rank when split) and returns its exit code; when split, a
  // failure may leave peers waiting, so the whole job is ended with that code.
  int Fail(const Status& status) const;

  // Seconds rank 0 spent waiting on its pipeline peers so far (for the bubble: a first stage
  // waits only for the next stage to take a micro-batch and for the last stage's logits).
  double pipeline_wait_seconds() const { return groups.pp->stats().seconds; }
  // Rank 0's engine leads the other ranks: a heartbeat well inside --comm-timeout, a failed step
  // ends the whole job (the followers cannot go on without rank 0), and the steps are cut into
  // the flags' micro-batches over pipeline stages. Nothing when not split.
  void LeadFollowers(EngineConfig& config) const;
  // The other ranks: follow rank 0's engine until it stops; the exit code.
  int Follow(const Model& model, int32_t threads) const;
};

// Opens the groups or prints why not; the flags' error exit code otherwise.
StatusOr<ParallelRun> OpenParallelRun(const ParallelFlags& flags);

}  // namespace ferry::cli
