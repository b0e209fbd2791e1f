#include "parallel_flags.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "comm/world.h"
#include "commands.h"
#include "engine/follower.h"
#include "sampling/sampler.h"

namespace ferry::cli {

void ParallelFlags::Add(CLI::App* cmd) {
  cmd->add_option("--tensor-parallel", tensor_parallel,
                  "split every layer over this many MPI ranks (heads, FFN rows, vocabulary); with "
                  "--pipeline-parallel their product is mpirun's -np")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pipeline-parallel", pipeline_parallel, "split the layers into this many stages of ranks")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--comm-timeout", comm_timeout_s,
                  "seconds a rank waits for its peers before ending the job (a rank died or a link broke)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

void ParallelFlags::AddMicroBatches(CLI::App* cmd) {
  cmd->add_option("--pipeline-micro-batch-tokens", micro_batches.min_tokens,
                  "with --pipeline-parallel: a step's batch is cut into micro-batches of at least this "
                  "many tokens, so that the stages work on different ones at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pipeline-micro-batches", micro_batches.max_count,
                  "with --pipeline-parallel: micro-batches per step at most (1: no overlap)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

StatusOr<comm::ProcessGroups> ParallelFlags::Open() const {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world, comm::OpenWorld({comm_timeout_s}));
  const Status layout = comm::CheckLayout(world->size(), world->rank(), tensor_parallel, pipeline_parallel);
  if (!layout.ok() && world->size() > 1) {
    // Every rank finds the same mismatch; each says so before any of them exits, since mpirun
    // ends the whole job at the first exit.
    std::fprintf(stderr, "ferry: %s\n", layout.ToString().c_str());
    std::fflush(stderr);
    (void)world->Barrier();
    comm::AbortWorld(2);
  }
  return comm::MakeProcessGroups(std::move(world), tensor_parallel, pipeline_parallel);
}

StatusOr<ParallelRun> OpenParallelRun(const ParallelFlags& flags) {
  FERRY_ASSIGN_OR_RETURN(comm::ProcessGroups g, flags.Open());
  ParallelRun run;
  run.groups = std::move(g);
  run.comm_timeout_s = flags.comm_timeout_s;
  run.micro_batches = flags.micro_batches;
  return run;
}

void ParallelRun::PrintRankMemory(const Model& model, const KvCacheTypes& kv_types) const {
  if (!split()) return;
  const ModelConfig& c = model.config();
  const ParallelLayout l = layout();
  const StageLayers stage = PlanStageLayers(c.n_layers, l.pp_rank(), l.pp_size());
  const double kv_token = static_cast<double>(stage.last - stage.first) *
                          static_cast<double>(KvStorage::SlotBytes(c.n_kv_heads, c.head_dim, kv_types));
  std::fprintf(
      stderr,
      "ferry: rank %d of %d (tensor %d/%d, stage %d/%d, layers %d-%d): weights %.2f MiB, KV cache %.2f "
      "KiB per token (%d KV heads)\n",
      groups.world->rank(), groups.world->size(), l.tp_rank(), l.tp_size(), l.pp_rank(), l.pp_size(),
      stage.first, stage.last - 1, static_cast<double>(model.WeightBytes()) / (1 << 20), kv_token / 1024,
      c.n_kv_heads);
}

StatusOr<uint64_t> ParallelRun::AgreeOnSeed(uint64_t seed) const {
  if (!split() || seed != SamplingParams{}.seed) return seed;
  uint64_t s = root() ? std::random_device{}() : 0;
  FERRY_RETURN_IF_ERROR(groups.world->Broadcast(&s, sizeof(s), 0));
  return s;
}

int ParallelRun::Fail(const Status& status) const {
  if (!split()) return cli::Fail(status);
  std::fprintf(stderr, "ferry: rank %d of %d: %s\n", groups.world->rank(), groups.world->size(),
               status.ToString().c_str());
  std::fflush(stderr);
  const int code = status.code() == StatusCode::kInvalidArgument ? 2 : 1;
  comm::AbortWorld(code);
  return code;
}

void ParallelRun::LeadFollowers(EngineConfig& config) const {
  if (!split()) return;
  config.followers = groups.world.get();
  config.follower_heartbeat_s = std::min(1.0, comm_timeout_s / 4);
  config.on_loop_failure = [this](const Status& status) { Fail(status); };
  config.micro_batches = micro_batches;
}

int ParallelRun::Follow(const Model& model, int32_t threads) const {
  Status st = RunFollower(model, *groups.world, threads);
  return st.ok() ? 0 : Fail(st);
}

}  // namespace ferry::cli
