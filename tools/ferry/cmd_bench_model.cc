// `ferry bench -m PATH [-p 512 -n 128 -r 3 -t T] [--json]`: llama-bench-style model speed.
// Prefill: one sequence of P random tokens in batches of up to --batch tokens (logits for the
// last token only); decode: N single-token steps after it (logits every step: the whole row, or
// with --logits-top-k K the K largest, all a split head then gathers). Each is timed R
// times (after one warm-up) and reported as mean +/- sd tok/s. In the same run the machine's
// read bandwidth is measured with the same thread count (kernels::MeasureReadBandwidth), and
// decode efficiency = bytes read per decoded token (weights + the KV cache up to that token)
// x decode tok/s / bandwidth.
// With speculation flags (--draft-model / --draft-quant q4 / --spec-ngram, --spec-tokens) the
// same run also decodes N greedy tokens on the serving engine twice per repetition, plainly
// and speculatively (prompt: the P random tokens, or --spec-prompt TEXT), and reports both
// rates, their ratio, the acceptance rate and the mean accepted drafts per verification.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/timer.h"
#include "commands.h"
#include "core/median.h"
#include "core/thread_pool.h"
#include "engine/engine_core.h"
#include "engine/loaded_model.h"
#include "kernels/kernels.h"
#include "model/kv_budget_cache.h"
#include "parallel_flags.h"
#include "sampling/sampler.h"

namespace ferry::cli {
namespace {

struct BenchOpts {
  std::string model;
  int n_prompt = 512, n_gen = 128, reps = 3, threads = 0, n_batch = 512;
  int depth = 0;      // context before the tests (llama-bench -d): prefilled, not timed
  int bw_mib = 1024;  // bandwidth probe buffer (far above any last-level cache)
  bool json = false;
  bool no_repack = false;
  SpecFlags spec;
  std::string spec_prompt;  // text for the engine decode runs (default: the random prompt)
  SparsityFlags sparsity;
  KvCacheFlags kv_cache;
  ParallelFlags parallel;
  int logits_top_k = 0;  // each decode row's need (ForwardBatch::logits_top_k); 0: the whole row
};

struct MeanSd {
  double mean = 0, sd = 0;
};
MeanSd Stats(const std::vector<double>& v) {
  MeanSd r;
  if (v.empty()) return r;
  for (double x : v) r.mean += x;
  r.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - r.mean) * (x - r.mean);
    r.sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  return r;
}

// One test of a KV-type list's entry against the list's first: the ratio of the mean rates,
// and the median, least and largest of the per-repetition ratios (repetition r of both ran
// back to back, so a pair shares the machine's state of that moment).
struct PairRatio {
  double of_means = 0, median = 0, lo = 0, hi = 0;
};
PairRatio RatioToFirst(const std::vector<double>& first, const std::vector<double>& other) {
  PairRatio r;
  const MeanSd a = Stats(first), b = Stats(other);
  if (a.mean > 0) r.of_means = b.mean / a.mean;
  std::vector<double> pairs;
  for (size_t i = 0; i < std::min(first.size(), other.size()); ++i)
    if (first[i] > 0) pairs.push_back(other[i] / first[i]);
  if (pairs.empty()) return r;
  r.median = Median(pairs);
  r.lo = *std::min_element(pairs.begin(), pairs.end());
  r.hi = *std::max_element(pairs.begin(), pairs.end());
  return r;
}

// The type of the bulk of the weights: that of the largest 2-D tensor other than embeddings.
std::string WeightTypeName(const formats::WeightSource& src) {
  // The type holding most bytes of the layers' matrices, then the others of a mix (Q4_K_M:
  // "q4_k+q6_k"), not the type of the single largest tensor (one q6_K ffn_down in Q4_K_M).
  // Types under 2% of those bytes (an MoE's f32 routers) are left out.
  std::map<DType, size_t> bytes;
  size_t total = 0;
  for (const auto& t : src.tensors()) {
    if (t.shape.size() < 2 || t.name == "token_embd.weight" || t.name == "output.weight") continue;
    bytes[t.dtype] += t.nbytes;
    total += t.nbytes;
  }
  std::vector<std::pair<size_t, DType>> by_bytes;
  for (const auto& [type, n] : bytes)
    if (n * 50 >= total) by_bytes.push_back({n, type});
  std::sort(by_bytes.rbegin(), by_bytes.rend());
  std::string name;
  for (const auto& [n, type] : by_bytes) name += (name.empty() ? "" : "+") + std::string(DTypeName(type));
  return name.empty() ? "unknown" : name;
}

// One KV cache type of the run (`--kv-cache-dtype f32,q8_0` lists several): its cache and rates.
struct KvRun {
  KvCacheTypes types;
  std::unique_ptr<KvCache> kv;
  std::vector<double> pp, tg;  // tok/s of each repetition
};

// Prefill P tokens of sequence 0 starting at position pos0; returns seconds.
StatusOr<double> Prefill(const Model& m, KvCache& kv, const std::vector<int32_t>& toks, int n_batch,
                         std::vector<float>& logits, ThreadPool& pool, const ForwardOptions& fo,
                         int pos0 = 0) {
  Timer timer;
  ForwardBatch b;
  const int p = static_cast<int>(toks.size());
  for (int s = 0; s < p; s += n_batch) {
    b.Clear();
    const int e = std::min(p, s + n_batch);
    for (int i = s; i < e; ++i) b.Add(toks[static_cast<size_t>(i)], pos0 + i, 0, i == p - 1);
    FERRY_RETURN_IF_ERROR(m.Forward(b, kv, logits.data(), &pool, fo));
  }
  return timer.Seconds();
}

// Decode N tokens of sequence 0 at positions pos0.. (one token per forward, each asking for its
// top_k largest logits, 0: the whole row); returns seconds.
StatusOr<double> Decode(const Model& m, KvCache& kv, const std::vector<int32_t>& toks, int pos0,
                        std::vector<float>& logits, ThreadPool& pool, const ForwardOptions& fo,
                        int32_t top_k) {
  Timer timer;
  ForwardBatch b;
  for (size_t i = 0; i < toks.size(); ++i) {
    b.Clear();
    b.Add(toks[i], pos0 + static_cast<int32_t>(i), 0, true, top_k);
    FERRY_RETURN_IF_ERROR(m.Forward(b, kv, logits.data(), &pool, fo));
  }
  return timer.Seconds();
}

// One greedy request of n_gen tokens on the serving engine, with or without speculation.
struct EngineDecode {
  double tokens_per_s = 0;  // after the first token
  EngineStats stats;
};
StatusOr<EngineDecode> DecodeOnEngine(Model& m, const std::vector<int32_t>& prompt, int n_gen,
                                      const spec::SpecConfig* sc, int threads, const KvCacheTypes& kv_types) {
  EngineConfig ec;
  ec.threads = threads;
  ec.kv_types = kv_types;
  const int32_t len = static_cast<int32_t>(prompt.size()) + n_gen + 64;
  ec.scheduler.max_seq_len = len;
  ec.scheduler.max_num_seqs = 1;
  ec.num_blocks = (len + ec.block_size - 1) / ec.block_size + 1;
  if (sc) ec.spec = *sc;
  FERRY_ASSIGN_OR_RETURN(auto core, EngineCore::Create(m, nullptr, ec));
  RequestOptions ro;
  ro.sampling.temperature = 0;
  ro.max_tokens = n_gen;
  ro.ignore_eos = true;
  FERRY_RETURN_IF_ERROR(core->Validate(prompt, ro));
  core->Add(0, prompt, ro, core->Now());
  RequestMetrics metrics;
  while (core->HasWork()) {
    FERRY_ASSIGN_OR_RETURN(std::vector<RequestOutput> outs, core->Step());
    for (const RequestOutput& out : outs)
      if (out.finished) metrics = out.metrics;
  }
  EngineDecode d;
  d.tokens_per_s = metrics.tpot_s > 0 ? 1.0 / metrics.tpot_s : 0.0;
  d.stats = core->Stats();
  return d;
}

int RunModelBench(const BenchOpts& o) {
  if (o.model.empty())
    return Fail(InvalidArgumentError("ferry bench needs -m PATH (or a subcommand: throughput)"));
  if (o.n_prompt < 0 || o.n_gen < 0 || o.depth < 0 || o.reps < 1 || o.n_batch < 1)
    return Fail(InvalidArgumentError("-p, -n and -d must be >= 0, -r and --batch >= 1"));
  auto kv_list = o.kv_cache.ToTypeList();
  if (!kv_list.ok()) return Fail(kv_list.status());
  if (o.spec.enabled() && kv_list->size() > 1)
    return Fail(InvalidArgumentError("speculative decoding runs one KV cache type: give one, not a list"));
  auto par = OpenParallelRun(o.parallel);
  if (!par.ok()) return Fail(par.status());
  if (par->split() && o.spec.enabled())
    return par->Fail(UnsupportedError("speculative decoding does not run split over ranks yet"));
  LoadOptions lopts;
  lopts.repack_weights = !o.no_repack;
  lopts.sparsity = o.sparsity.options;
  lopts.parallel = par->layout();
  auto lm = LoadModel(o.model, lopts);
  if (!lm.ok()) return par->Fail(lm.status());
  for (const KvCacheTypes& types : *kv_list) par->PrintRankMemory(*lm->model, types);
  Model& m = *lm->model;
  const ModelConfig& c = m.config();
  const int ctx = std::max(1, o.depth + std::max(o.n_prompt, o.n_gen));  // each test starts at depth D
  SparsityStats stats;
  ForwardScratch scratch;
  ForwardOptions fo;
  fo.stats = &stats;
  fo.scratch = &scratch;
  // One cache per KV type of the list (budgeted under --kv-policy sink|h2o); the repetitions
  // alternate between them, so a list compares the types in one process, on one copy of the
  // weights, under the same machine drift.
  std::vector<KvRun> runs;
  for (const KvCacheTypes& types : *kv_list) {
    auto kv = CreateKvCacheFor(c, m.sparsity(), 1, ctx, std::max(o.n_batch, 2), &stats, types);
    if (!kv.ok()) return Fail(kv.status());
    runs.push_back(KvRun{types, std::move(*kv), {}, {}});
  }
  ThreadPool pool(o.threads);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(3, c.n_vocab - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(o.n_prompt)), gen(static_cast<size_t>(o.n_gen)),
      context(static_cast<size_t>(o.depth));
  for (auto& t : prompt) t = tok(rng);
  for (auto& t : context) t = tok(rng);
  for (auto& t : gen) t = tok(rng);

  // Warm-up (page in the weights, wake the threads), as llama-bench does.
  for (KvRun& run : runs) {
    std::vector<int32_t> w = {tok(rng), tok(rng)};
    auto s = Prefill(m, *run.kv, w, o.n_batch, logits, pool, fo);
    if (!s.ok()) return par->Fail(s.status());
  }
  double decode_s = 0, decode_comm_s = 0;  // over every timed decode step
  uint64_t decode_gathered = 0;            // the head's gathered bytes, over every timed decode step
  // One collective alone: the all-reduce of a decode step's [dim] f32 partials (after W_o and down).
  double allreduce_s = 0;
  if (par->split()) {
    std::vector<float> y(static_cast<size_t>(c.dim), 1.0f);
    constexpr int kCalls = 200;
    if (Status s = par->groups.world->Barrier(); !s.ok()) return par->Fail(s);
    Timer t;
    for (int i = 0; i < kCalls; ++i)
      if (Status s = par->groups.world->AllReduceSum(y.data(), y.size()); !s.ok()) return par->Fail(s);
    allreduce_s = t.Seconds() / kCalls;
  }
  stats = SparsityStats{};  // count the timed passes only
  // The context the tests run at is prefilled once per cache (untimed): the prompt and decode
  // tests write rows from the depth on, before any query reads them, so it stays as it was;
  // a --kv-policy cache, which evicts from it, gets it again before each test. Repetitions
  // then follow one another within seconds, so the types of a list are compared under the
  // same machine state (llama-bench clears and refills its cache at every repetition).
  const bool refill_context = m.sparsity().UsesKvBudget();
  for (int r = 0; r < o.reps; ++r) {
    for (KvRun& run : runs) {
      KvCache& kv = *run.kv;
      if (o.depth > 0 && (r == 0 || refill_context)) {
        auto s = Prefill(m, kv, context, o.n_batch, logits, pool, fo);
        if (!s.ok()) return par->Fail(s.status());
      }
      if (o.n_prompt > 0) {
        auto s = Prefill(m, kv, prompt, o.n_batch, logits, pool, fo, o.depth);
        if (!s.ok()) return par->Fail(s.status());
        run.pp.push_back(o.n_prompt / *s);
      }
      if (o.n_gen > 0) {
        // As llama-bench's tg test: decode from the context depth, not after the prompt test
        // (whose rows past the depth are overwritten before any query reads them). A --kv-policy
        // cache may have evicted part of the context meanwhile: it gets it again (untimed).
        if (o.depth > 0 && o.n_prompt > 0 && refill_context) {
          auto s = Prefill(m, kv, context, o.n_batch, logits, pool, fo);
          if (!s.ok()) return par->Fail(s.status());
        }
        const double comm0 = par->comm_seconds();
        fo.logits_gathered_bytes = &decode_gathered;
        auto s = Decode(m, kv, gen, o.depth, logits, pool, fo, o.logits_top_k);
        fo.logits_gathered_bytes = nullptr;
        if (!s.ok()) return par->Fail(s.status());
        run.tg.push_back(o.n_gen / *s);
        decode_s += *s;
        decode_comm_s += par->comm_seconds() - comm0;
      }
    }
  }
  const double bw = kernels::MeasureReadBandwidth(static_cast<size_t>(o.bw_mib) << 20, 3, &pool);
  // Per KV type: bytes per decoded token (all weights once, plus K and V in their cache types
  // of every earlier position in every layer, averaged over the decoded positions D .. D+N-1,
  // each reading pos+1 slots), the rates and the decode efficiency.
  struct Figures {
    double kv_bytes, tok_bytes, eff;
    MeanSd pp, tg;
  };
  auto figures = [&](const KvRun& run) {
    Figures f;
    const double kv_row = static_cast<double>(c.n_layers) *
                          static_cast<double>(KvStorage::SlotBytes(c.n_kv_heads, c.head_dim, run.types));
    f.kv_bytes = o.n_gen > 0 ? kv_row * (o.depth + (o.n_gen + 1) / 2.0) : 0.0;
    f.tok_bytes = static_cast<double>(m.WeightBytes()) + f.kv_bytes;
    f.pp = Stats(run.pp);
    f.tg = Stats(run.tg);
    f.eff = bw > 0 ? f.tok_bytes * f.tg.mean / bw : 0.0;
    return f;
  };
  const KvCacheTypes& kv_types = runs.front().types;  // the one type speculation runs with
  const std::string wtype = WeightTypeName(*lm->source);
  const std::string name = lm->source->metadata().GetString("general.name").value_or(o.model);

  // Speculative decode against plain decode on the engine, alternating within each repetition.
  std::vector<double> eng_tps, spec_tps;
  EngineStats spec_stats;
  std::string spec_method;
  SpecDraft draft;
  spec::SpecConfig sc;
  if (o.spec.enabled() && o.n_gen > 1) {
    if (Status s = o.spec.Apply(*lm, lopts, &pool, draft, sc); !s.ok()) return Fail(s);
    std::vector<int32_t> sp = prompt;
    if (!o.spec_prompt.empty()) sp = lm->tokenizer->Encode(o.spec_prompt, true, false);
    if (sp.empty()) sp = {1};
    for (int r = 0; r < o.reps; ++r) {
      auto plain = DecodeOnEngine(m, sp, o.n_gen, nullptr, pool.size(), kv_types);
      if (!plain.ok()) return Fail(plain.status());
      auto spec = DecodeOnEngine(m, sp, o.n_gen, &sc, pool.size(), kv_types);
      if (!spec.ok()) return Fail(spec.status());
      eng_tps.push_back(plain->tokens_per_s);
      spec_tps.push_back(spec->tokens_per_s);
      const EngineStats& st = spec->stats;
      spec_stats.spec_verifications += st.spec_verifications;
      spec_stats.spec_draft_tokens += st.spec_draft_tokens;
      spec_stats.spec_accepted_tokens += st.spec_accepted_tokens;
      spec_stats.spec_draft_s += st.spec_draft_s;
      spec_stats.spec_verify_s += st.spec_verify_s;
    }
    spec_method = !o.spec.draft_quant.empty()   ? "self-draft-q4"
                  : !o.spec.draft_model.empty() ? "draft-model"
                                                : "ngram";
  }
  const MeanSd engs = Stats(eng_tps), specs = Stats(spec_tps);
  // Communication per decode step (this rank's; waiting for a slower rank counts) and its share.
  const double steps = static_cast<double>(o.reps) * o.n_gen;
  const double comm_s = steps > 0 ? decode_comm_s / steps : 0.0;
  const double comm_share = decode_s > 0 ? decode_comm_s / decode_s : 0.0;
  const double gathered = steps > 0 ? static_cast<double>(decode_gathered) / steps : 0.0;
  if (!par->root()) return 0;  // every rank ran the same steps; rank 0 reports

  if (o.json) {
    for (const KvRun& run : runs) {
      const Figures f = figures(run);
      nlohmann::json j = {{"model", name},
                          {"path", o.model},
                          {"weight_type", wtype},
                          {"cpu", kernels::CpuModelName()},
                          {"isa", kernels::IsaName(kernels::ActiveIsa())},
                          {"threads", pool.size()},
                          {"n_prompt", o.n_prompt},
                          {"n_gen", o.n_gen},
                          {"n_depth", o.depth},
                          {"type_k", DTypeName(run.types.k)},
                          {"type_v", DTypeName(run.types.v)},
                          {"cache_rotate", run.types.rotate_k},
                          {"reps", o.reps},
                          {"prefill_tokens_per_s", f.pp.mean},
                          {"prefill_tokens_per_s_sd", f.pp.sd},
                          {"decode_tokens_per_s", f.tg.mean},
                          {"decode_tokens_per_s_sd", f.tg.sd},
                          // Each repetition's rate, as llama-bench's samples_ts: with a list of
                          // KV types, sample r of every type ran back to back (per-pair ratios).
                          {"prefill_samples_ts", run.pp},
                          {"decode_samples_ts", run.tg},
                          {"weight_bytes", m.WeightBytes()},
                          {"bytes_per_decode_token", f.tok_bytes},
                          {"bandwidth_gb_per_s", bw / 1e9},
                          {"decode_efficiency", f.eff},
                          {"sparsity", SparsityJson(m, stats)},
                          {"tensor_parallel", o.parallel.tensor_parallel},
                          {"pipeline_parallel", o.parallel.pipeline_parallel},
                          {"comm_s", comm_s},
                          {"allreduce_s", allreduce_s},
                          {"comm_share", comm_share},
                          {"logits_top_k", o.logits_top_k},
                          {"logits_gather_bytes", gathered}};
      if (!spec_tps.empty()) {
        j["spec_method"] = spec_method;
        j["spec_tokens"] = sc.num_tokens;
        j["spec_adaptive"] = sc.adaptive;
        j["engine_decode_tokens_per_s"] = engs.mean;
        j["spec_decode_tokens_per_s"] = specs.mean;
        j["spec_decode_tokens_per_s_sd"] = specs.sd;
        j["spec_speedup"] = engs.mean > 0 ? specs.mean / engs.mean : 0.0;
        j["acceptance_rate"] = spec_stats.SpecAcceptanceRate();
        j["mean_accepted_tokens"] = spec_stats.SpecMeanAcceptedTokens();
        j["spec_draft_s"] = spec_stats.spec_draft_s / o.reps;
        j["spec_verify_s"] = spec_stats.spec_verify_s / o.reps;
      }
      std::printf("%s\n", j.dump().c_str());
    }
  } else {
    std::printf("cpu: %s; kernel table: %s (FERRY_ISA selects another)\n\n", kernels::CpuModelName().c_str(),
                kernels::IsaName(kernels::ActiveIsa()));
    std::printf(
        "| model | type | isa | threads | type_k | type_v | test | t/s "
        "|\n|---|---|---|---|---|---|---|---|\n");
    const std::string at = o.depth > 0 ? fmt::format(" @ d{}", o.depth) : "";
    auto type_k = [](const KvCacheTypes& t) {
      return fmt::format("{}{}", DTypeName(t.k), t.rotate_k ? "+rot" : "");
    };
    for (const KvRun& run : runs) {
      const Figures f = figures(run);
      if (o.n_prompt > 0)
        std::printf("| %s | %s | %s | %d | %s | %s | pp%d%s | %.2f +/- %.2f |\n", name.c_str(), wtype.c_str(),
                    kernels::IsaName(kernels::ActiveIsa()), pool.size(), type_k(run.types).c_str(),
                    DTypeName(run.types.v), o.n_prompt, at.c_str(), f.pp.mean, f.pp.sd);
      if (o.n_gen > 0)
        std::printf("| %s | %s | %s | %d | %s | %s | tg%d%s | %.2f +/- %.2f |\n", name.c_str(), wtype.c_str(),
                    kernels::IsaName(kernels::ActiveIsa()), pool.size(), type_k(run.types).c_str(),
                    DTypeName(run.types.v), o.n_gen, at.c_str(), f.tg.mean, f.tg.sd);
    }
    std::printf("\nread bandwidth (%d threads, %d MiB): %.2f GB/s\n", pool.size(), o.bw_mib, bw / 1e9);
    for (const KvRun& run : runs) {
      const Figures f = figures(run);
      std::printf(
          "%s/%s: bytes per decoded token %.1f MB (weights %.1f MB + KV %.1f MB); decode efficiency %.1f%%\n",
          type_k(run.types).c_str(), DTypeName(run.types.v), f.tok_bytes / 1e6,
          static_cast<double>(m.WeightBytes()) / 1e6, f.kv_bytes / 1e6, f.eff * 100);
    }
    for (size_t i = 1; i < runs.size(); ++i) {  // each later type of a list against the first
      auto line = [&](const char* test, const std::vector<double>& first, const std::vector<double>& other) {
        if (first.empty()) return;
        const PairRatio r = RatioToFirst(first, other);
        std::printf("%s/%s vs %s/%s, %s: x%.3f of the means; per repetition median x%.3f (x%.3f .. x%.3f)\n",
                    type_k(runs[i].types).c_str(), DTypeName(runs[i].types.v), type_k(runs[0].types).c_str(),
                    DTypeName(runs[0].types.v), test, r.of_means, r.median, r.lo, r.hi);
      };
      line("prefill", runs[0].pp, runs[i].pp);
      line("decode", runs[0].tg, runs[i].tg);
    }
    if (!spec_tps.empty())
      std::printf(
          "speculative decode (%s, K %d) on the engine: %.2f +/- %.2f tok/s vs plain %.2f +/- %.2f tok/s "
          "(x%.2f); acceptance %.1f%%, mean accepted %.2f per verification; draft %.1f ms, verify %.1f ms "
          "per run\n",
          spec_method.c_str(), sc.num_tokens, specs.mean, specs.sd, engs.mean, engs.sd,
          engs.mean > 0 ? specs.mean / engs.mean : 0.0, spec_stats.SpecAcceptanceRate() * 100,
          spec_stats.SpecMeanAcceptedTokens(), spec_stats.spec_draft_s * 1e3 / o.reps,
          spec_stats.spec_verify_s * 1e3 / o.reps);
    if (std::string sp = SparsityReport(m, stats); !sp.empty()) std::printf("%s\n", sp.c_str());
    if (par->split())
      std::printf(
          "ranks: tensor-parallel %d x pipeline-parallel %d; communication (rank 0) %.3f ms per decode step, "
          "%.1f%% of a step (comm_s %.6f); one all-reduce of %d f32 over all %d ranks alone: %.1f us; "
          "output head gathers %.0f bytes per decode step (--logits-top-k %d)\n",
          o.parallel.tensor_parallel, o.parallel.pipeline_parallel, comm_s * 1e3, comm_share * 100, comm_s,
          c.dim, par->groups.world->size(), allreduce_s * 1e6, gathered, o.logits_top_k);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Runner AddBenchModelOptions(CLI::App& bench) {
  auto o = std::make_shared<BenchOpts>();
  // Not required(): `ferry bench throughput -m ...` is a nested subcommand; RunModelBench checks it.
  bench.add_option("-m,--model", o->model, "model file (GGUF, Hugging Face folder or llama2.c .bin)");
  bench.add_option("-p,--n-prompt", o->n_prompt, "prompt tokens for prefill (0: skip prefill)")
      ->capture_default_str();
  bench.add_option("-n,--n-gen", o->n_gen, "tokens to decode (0: skip decode)")->capture_default_str();
  bench
      .add_option("-d,--n-depth", o->depth,
                  "context depth: prefill this many tokens (untimed) before the prompt and decode tests, as "
                  "llama-bench -d")
      ->capture_default_str();
  bench.add_option("-r,--repetitions", o->reps, "repetitions of each test")->capture_default_str();
  bench.add_option("-t,--threads", o->threads, "threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  bench.add_option("-b,--batch", o->n_batch, "prompt tokens per forward pass")->capture_default_str();
  bench.add_option("--bw-mib", o->bw_mib, "bandwidth probe buffer in MiB")
      ->capture_default_str()
      ->check(CLI::Range(16, 65536));
  bench.add_flag("--json", o->json, "one JSON object per line");
  bench
      .add_option(
          "--logits-top-k", o->logits_top_k,
          "decode steps need only each row's K largest logits (1: greedy, 40: top-k 40 sampling), so "
          "a --tensor-parallel head gathers K candidates per rank instead of the row; 0: the whole row, "
          "as logprobs need")
      ->capture_default_str()
      ->check(CLI::Range(0, static_cast<int>(kMaxGatheredTopK)));
  o->parallel.Add(&bench);
  bench.add_flag("--no-repack", o->no_repack,
                 "compute q4_0/q8_0 weights in place from the file (no repacked copy)");
  o->spec.Add(&bench);
  bench.add_option("--spec-prompt", o->spec_prompt,
                   "prompt text for the speculative runs (default: the random prompt)");
  o->sparsity.Add(&bench);
  o->kv_cache.Add(&bench);
  return [o]() -> int { return RunModelBench(*o); };
}

}  // namespace ferry::cli
