// `ferry bench throughput`: offline serving throughput. Submits a synthetic workload (lengths
// drawn uniformly from ranges with a seed, optionally a shared prompt prefix) to the engine
// all at once and reports token throughput, latency percentiles, preemptions, prefix-cache
// hit rate and KV waste (with --kv-policy: evictions and KV memory saved), as text or one JSON
// object.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "base/timer.h"
#include "commands.h"
#include "constraint_flags.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine_flags.h"
#include "length_range.h"
#include "parallel_flags.h"

namespace ferry::cli {
namespace {

struct ThroughputBenchOpts {
  ModelFlags model;
  int32_t num_prompts = 64;
  std::string input_len = "32:512", output_len = "16:256";
  double prefix_share = 0;
  int32_t n = 1;
  uint64_t seed = 0;
  std::string policy = "continuous";
  int32_t max_batch_tokens = 512;
  int32_t max_num_seqs = 32;
  std::string kv_memory = "2G";
  int32_t block_size = 16;
  bool no_prefix_caching = false;
  float temperature = 0;
  bool json = false;
  ConstraintFlags constraint;  // --json-schema FILE (or --grammar / --regex) on every request
  ParallelFlags parallel;      // under mpirun: rank 0 runs the engine, the other ranks follow it
};

int RunThroughputBench(const ThroughputBenchOpts& o) {
  auto in_range = ParseLengthRange(o.input_len, "--input-len");
  if (!in_range.ok()) return Fail(in_range.status());
  auto out_range = ParseLengthRange(o.output_len, "--output-len");
  if (!out_range.ok()) return Fail(out_range.status());
  auto kv_bytes = ParseMemorySize(o.kv_memory, "--kv-cache-memory");
  if (!kv_bytes.ok()) return Fail(kv_bytes.status());
  if (o.policy != "continuous" && o.policy != "static")
    return Fail(InvalidArgumentError("--policy '{}': expected continuous or static", o.policy));
  if (o.prefix_share < 0 || o.prefix_share > 1)
    return Fail(InvalidArgumentError("--prefix-share must be in [0, 1]"));

  if (Status st = o.model.sparsity.CheckSupportedByEngine(); !st.ok()) return Fail(st);
  auto spec = o.constraint.ToSpec();
  if (!spec.ok()) return Fail(spec.status());
  auto kv_types = o.model.kv_cache.ToTypes();
  if (!kv_types.ok()) return Fail(kv_types.status());
  auto par = OpenParallelRun(o.parallel);
  if (!par.ok()) return Fail(par.status());
  LoadOptions load = o.model.ToLoadOptions();
  load.parallel = par->layout();
  auto lm = LoadModel(o.model.model, load);
  if (!lm.ok()) return par->Fail(lm.status());
  par->PrintRankMemory(*lm->model, *kv_types);
  if (!par->root()) return par->Follow(*lm->model, o.model.threads);
  std::shared_ptr<const constraint::CompiledGrammar> grammar;
  if (*spec) {
    if (!lm->tokenizer)
      return par->Fail(InvalidArgumentError("a constraint needs the model's tokenizer; it has none"));
    auto compiled = ConstraintFlags::Compile(*spec, *lm->tokenizer);
    if (!compiled.ok()) return par->Fail(compiled.status());
    grammar = *compiled;
  }
  const int32_t n_vocab = lm->config().n_vocab;

  EngineConfig ec;
  ec.kv_types = *kv_types;
  ec.block_size = o.block_size;
  ec.kv_cache_bytes = *kv_bytes;
  ec.prefix_caching = !o.no_prefix_caching;
  ec.threads = o.model.threads;
  ec.scheduler.max_batch_tokens = o.max_batch_tokens;
  ec.scheduler.max_num_seqs = o.max_num_seqs;
  ec.scheduler.policy = o.policy == "static" ? BatchPolicy::kStatic : BatchPolicy::kContinuous;
  par->LeadFollowers(ec);

  // Workload: lengths uniform in the ranges; the first prefix_share of each prompt is common.
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  std::vector<int32_t> common(static_cast<size_t>(in_range->hi));
  for (int32_t& t : common) t = uniform(3, n_vocab - 1);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> options;
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    const int32_t len = uniform(in_range->lo, in_range->hi);
    const int32_t shared = static_cast<int32_t>(o.prefix_share * len);
    std::vector<int32_t> p(common.begin(), common.begin() + shared);
    while (static_cast<int32_t>(p.size()) < len) p.push_back(uniform(3, n_vocab - 1));
    prompts.push_back(std::move(p));
    RequestOptions ro;
    ro.max_tokens = uniform(out_range->lo, out_range->hi);
    // Constrained, a request ends where its grammar does (or at max_tokens): the grammar's end
    // allows only end tokens.
    ro.ignore_eos = grammar == nullptr;
    ro.sampling.constraint = grammar;
    ro.n = o.n;
    ro.sampling.temperature = o.temperature;
    ro.sampling.seed = o.seed + static_cast<uint64_t>(i) * 1000;
    options.push_back(ro);
  }

  std::mutex mu;
  std::vector<RequestMetrics> done;
  auto engine = Engine::Create(*lm->model, &*lm->tokenizer, ec, [&](const RequestOutput& out) {
    if (!out.finished) return;
    std::lock_guard<std::mutex> l(mu);
    done.push_back(out.metrics);
  });
  if (!engine.ok()) return par->Fail(engine.status());
  Timer timer;
  // One hand-over: the first step sees every request (static batches are then the first
  // --max-num-seqs requests, not whatever had arrived when the loop woke up).
  if (auto ids = (*engine)->AddRequests(prompts, options); !ids.ok()) return par->Fail(ids.status());
  (*engine)->WaitIdle();
  const double elapsed = timer.Seconds();
  if (Status st = (*engine)->LoopStatus(); !st.ok()) return par->Fail(st);
  const EngineStats stats = (*engine)->Stats();

  int64_t in_tokens = 0, out_tokens = 0, decode_tokens = 0;
  double first_token = 1e300, last_token = 0;
  std::vector<double> ttft, tpot, itl, e2e, queue;
  for (const RequestMetrics& m : done) {
    out_tokens += m.output_tokens;
    if (m.output_tokens > 1) {
      decode_tokens += m.output_tokens - 1;
      first_token = std::min(first_token, m.arrival_s + m.ttft_s);
      last_token = std::max(last_token, m.arrival_s + m.e2e_s);
      tpot.push_back(m.tpot_s * 1e3);
    }
    ttft.push_back(m.ttft_s * 1e3);
    e2e.push_back(m.e2e_s * 1e3);
    queue.push_back(m.queue_s * 1e3);
    for (double x : m.itl_s) itl.push_back(x * 1e3);
  }
  for (const auto& p : prompts) in_tokens += static_cast<int64_t>(p.size());

  nlohmann::ordered_json j;
  j["policy"] = o.policy;
  j["num_prompts"] = o.num_prompts;
  j["n"] = o.n;
  j["constraint"] = !o.constraint.schema_file.empty()    ? "json-schema " + o.constraint.schema_file
                    : !o.constraint.grammar_file.empty() ? "grammar " + o.constraint.grammar_file
                    : !o.constraint.regex.empty()        ? "regex " + o.constraint.regex
                                                         : "none";
  j["elapsed_s"] = elapsed;
  j["input_tokens"] = in_tokens;
  j["output_tokens"] = out_tokens;
  j["output_tokens_per_s"] = out_tokens / elapsed;
  j["total_tokens_per_s"] = (in_tokens + out_tokens) / elapsed;
  j["decode_tokens_per_s"] = last_token > first_token ? decode_tokens / (last_token - first_token) : 0.0;
  for (auto [name, v] : {std::pair<const char*, std::vector<double>*>{"ttft", &ttft},
                         {"tpot", &tpot},
                         {"itl", &itl},
                         {"e2e", &e2e},
                         {"queue", &queue}})
    for (double p : {50.0, 90.0, 99.0})
      j[fmt::format("{}_p{}_ms", name, static_cast<int>(p))] = Percentile(*v, p);
  j["prefill_tokens_computed"] = stats.prefill_tokens_computed;
  j["decode_tokens_computed"] = stats.decode_tokens_computed;
  j["preemptions"] = stats.preemptions;
  j["prefix_cache_hit_rate"] = stats.PrefixHitRate();
  j["kv_waste"] = stats.KvWaste();
  j["steps"] = stats.steps;
  const size_t block_bytes = static_cast<size_t>(stats.kv_block_bytes);  // one KV group's layers
  j["kv_blocks"] = stats.kv_blocks;
  j["kv_groups"] = stats.kv_groups;
  j["kv_window_released_blocks"] = stats.kv_window_released_blocks;
  j["type_k"] = DTypeName(kv_types->k);
  j["type_v"] = DTypeName(kv_types->v);
  j["cache_rotate"] = kv_types->rotate_k;
  j["peak_running"] = stats.peak_running;
  j["mean_running"] = stats.MeanRunning();
  // KV budgets: evictions and KV memory saved (peak blocks held vs what full caches of the same
  // positions would have held at their peak step).
  const SparsityOptions& sp = o.model.sparsity.options;
  j["kv_policy"] = KvPolicyName(sp.kv_policy);
  j["kv_budget"] = sp.kv_budget;
  j["kv_evicted_tokens"] = stats.kv_evicted_tokens;
  j["kv_peak_blocks"] = stats.kv_peak_blocks;
  j["kv_peak_full_blocks"] = stats.kv_peak_full_blocks;
  j["kv_peak_bytes"] = stats.kv_peak_blocks * static_cast<int64_t>(block_bytes);
  j["kv_full_bytes"] = stats.kv_peak_full_blocks * static_cast<int64_t>(block_bytes);
  j["kv_saved_fraction"] =
      stats.kv_peak_full_blocks > 0
          ? 1.0 - static_cast<double>(stats.kv_peak_blocks) / static_cast<double>(stats.kv_peak_full_blocks)
          : 0.0;
  // Split over ranks: the KV figures above are rank 0's shard; communication is rank 0's time
  // in the forward's collectives and in sending the steps to the other ranks.
  j["tensor_parallel"] = o.parallel.tensor_parallel;
  j["pipeline_parallel"] = o.parallel.pipeline_parallel;
  j["micro_batches_per_step"] =
      stats.steps > 0 ? static_cast<double>(stats.micro_batches) / static_cast<double>(stats.steps) : 0.0;
  // The pipeline bubble as rank 0 (the first stage) sees it: its time waiting on the next stage
  // to take a micro-batch and on the last stage's logits, as a share of the run.
  j["pipeline_bubble_share"] = par->pipeline_wait_seconds() / elapsed;
  j["comm_s"] = par->comm_seconds();
  j["step_send_s"] = par->groups.world->stats().seconds;
  j["block_size"] = o.block_size;
  j["max_batch_tokens"] = o.max_batch_tokens;
  j["max_num_seqs"] = o.max_num_seqs;
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (const auto& [k, v] : j.items()) std::printf("%-26s %s\n", k.c_str(), v.dump().c_str());
  }
  return 0;
}

}  // namespace

Runner AddBenchThroughputCommand(CLI::App& bench) {
  auto o = std::make_shared<ThroughputBenchOpts>();
  CLI::App* cmd = bench.add_subcommand("throughput", "offline serving throughput of the batching engine");
  o->model.Add(cmd);
  cmd->add_option("--num-prompts", o->num_prompts, "requests, all submitted at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", o->input_len, "prompt length range MIN:MAX (uniform)")
      ->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "output length range MIN:MAX (uniform)")
      ->capture_default_str();
  cmd->add_option("--prefix-share", o->prefix_share, "fraction of each prompt shared by all prompts")
      ->capture_default_str();
  cmd->add_option("--n", o->n, "parallel samples per request (forks sharing the prompt)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "workload and sampling seed")->capture_default_str();
  cmd->add_option("--policy", o->policy, "continuous | static batching")->capture_default_str();
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "tokens per step (decodes + prefill chunks)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "sequences per step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-memory", o->kv_memory,
                  "KV cache size: bytes (2G, 512M) or fraction of free RAM")
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "tokens per KV block")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "disable automatic prefix caching");
  cmd->add_option("--temp", o->temperature, "sampling temperature (0: greedy)")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object");
  o->constraint.Add(cmd, "--json-schema");
  o->parallel.Add(cmd);
  o->parallel.AddMicroBatches(cmd);
  return [o]() -> int { return RunThroughputBench(*o); };
}

}  // namespace ferry::cli
