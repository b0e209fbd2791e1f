// `ferry bench -m PATH [-p 512 -n 128 -r 3 -t T] [--json]`: llama-bench-style model speed.
// Prefill: one sequence of P random tokens in batches of up to --batch tokens (logits for the
// last token only); decode: N single-token steps after it (logits every step). Each is timed R
// times (after one warm-up) and reported as mean +/- sd tok/s. In the same run the machine's
// read bandwidth is measured with the same thread count (kernels::MeasureReadBandwidth), and
// decode efficiency = bytes read per decoded token (weights + the KV cache up to that token)
// x decode tok/s / bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "commands.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"

namespace ferry::cli {
namespace {

struct BenchOpts {
  std::string model;
  int n_prompt = 512, n_gen = 128, reps = 3, threads = 0, n_batch = 512;
  int bw_mib = 1024;  // bandwidth probe buffer (far above any last-level cache)
  bool json = false;
  bool no_repack = false;
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

// The type of the bulk of the weights: that of the largest 2-D tensor other than embeddings.
std::string WeightTypeName(const formats::WeightSource& src) {
  const formats::TensorRef* best = nullptr;
  for (const auto& t : src.tensors()) {
    if (t.shape.size() != 2 || t.name == "token_embd.weight" || t.name == "output.weight") continue;
    if (!best || t.nbytes > best->nbytes) best = &t;
  }
  return best ? DTypeName(best->dtype) : "unknown";
}

// Prefill P tokens of sequence 0 starting at position 0; returns seconds.
StatusOr<double> Prefill(Model& m, KvCache& kv, const std::vector<int32_t>& toks, int n_batch, std::vector<float>& logits,
                         ThreadPool& pool) {
  Timer timer;
  ForwardBatch b;
  const int p = static_cast<int>(toks.size());
  for (int s = 0; s < p; s += n_batch) {
    b.Clear();
    const int e = std::min(p, s + n_batch);
    for (int i = s; i < e; ++i) b.Add(toks[static_cast<size_t>(i)], i, 0, i == p - 1);
    FERRY_RETURN_IF_ERROR(m.Forward(b, kv, logits.data(), &pool));
  }
  return timer.Seconds();
}

// Decode N tokens of sequence 0 at positions pos0.. (one token per forward); returns seconds.
StatusOr<double> Decode(Model& m, KvCache& kv, const std::vector<int32_t>& toks, int pos0, std::vector<float>& logits,
                        ThreadPool& pool) {
  Timer timer;
  ForwardBatch b;
  for (size_t i = 0; i < toks.size(); ++i) {
    b.Clear();
    b.Add(toks[i], pos0 + static_cast<int32_t>(i), 0, true);
    FERRY_RETURN_IF_ERROR(m.Forward(b, kv, logits.data(), &pool));
  }
  return timer.Seconds();
}

int RunBench(const BenchOpts& o) {
  if (o.model.empty()) return Fail(InvalidArgumentError("ferry bench needs -m PATH (or a subcommand: throughput)"));
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1 || o.n_batch < 1)
    return Fail(InvalidArgumentError("-p and -n must be >= 0, -r and --batch >= 1"));
  LoadOptions lopts;
  lopts.repack_weights = !o.no_repack;
  auto lm = LoadModel(o.model, lopts);
  if (!lm.ok()) return Fail(lm.status());
  Model& m = *lm->model;
  const ModelConfig& c = m.config();
  const int ctx = std::max(1, o.n_prompt + o.n_gen);
  auto kv = ContiguousKvCache::Create(c.n_layers, 1, ctx, c.n_kv_heads, c.head_dim);
  if (!kv.ok()) return Fail(kv.status());
  ThreadPool pool(o.threads);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(3, c.n_vocab - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(o.n_prompt)), gen(static_cast<size_t>(o.n_gen));
  for (auto& t : prompt) t = tok(rng);
  for (auto& t : gen) t = tok(rng);

  // Warm-up (page in the weights, wake the threads), as llama-bench does.
  {
    std::vector<int32_t> w = {tok(rng), tok(rng)};
    auto s = Prefill(m, *kv, w, o.n_batch, logits, pool);
    if (!s.ok()) return Fail(s.status());
  }
  std::vector<double> pp, tg;
  for (int r = 0; r < o.reps; ++r) {
    if (o.n_prompt > 0) {
      auto s = Prefill(m, *kv, prompt, o.n_batch, logits, pool);
      if (!s.ok()) return Fail(s.status());
      pp.push_back(o.n_prompt / *s);
    }
    if (o.n_gen > 0) {
      auto s = Decode(m, *kv, gen, o.n_prompt, logits, pool);
      if (!s.ok()) return Fail(s.status());
      tg.push_back(o.n_gen / *s);
    }
  }
  const double bw = kernels::MeasureReadBandwidth(static_cast<size_t>(o.bw_mib) << 20, 3, &pool);
  // Bytes per decoded token: all weights once, plus K and V (f32) of every earlier position in
  // every layer, averaged over the decoded positions P .. P+N-1 (each reads pos+1 slots).
  const double kv_row = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * sizeof(float);
  const double kv_bytes = o.n_gen > 0 ? kv_row * (o.n_prompt + (o.n_gen + 1) / 2.0) : 0.0;
  const double tok_bytes = static_cast<double>(m.WeightBytes()) + kv_bytes;
  const MeanSd pps = Stats(pp), tgs = Stats(tg);
  const double eff = bw > 0 ? tok_bytes * tgs.mean / bw : 0.0;
  const std::string wtype = WeightTypeName(*lm->source);
  const std::string name = lm->source->metadata().GetString("general.name").value_or(o.model);

  if (o.json) {
    nlohmann::json j = {{"model", name},
                        {"path", o.model},
                        {"weight_type", wtype},
                        {"isa", kernels::IsaName(kernels::ActiveIsa())},
                        {"threads", pool.size()},
                        {"n_prompt", o.n_prompt},
                        {"n_gen", o.n_gen},
                        {"reps", o.reps},
                        {"prefill_tokens_per_s", pps.mean},
                        {"prefill_tokens_per_s_sd", pps.sd},
                        {"decode_tokens_per_s", tgs.mean},
                        {"decode_tokens_per_s_sd", tgs.sd},
                        {"weight_bytes", m.WeightBytes()},
                        {"bytes_per_decode_token", tok_bytes},
                        {"bandwidth_gb_per_s", bw / 1e9},
                        {"decode_efficiency", eff}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("| model | type | isa | threads | test | t/s |\n|---|---|---|---|---|---|\n");
    if (o.n_prompt > 0)
      std::printf("| %s | %s | %s | %d | pp%d | %.2f +/- %.2f |\n", name.c_str(), wtype.c_str(),
                  kernels::IsaName(kernels::ActiveIsa()), pool.size(), o.n_prompt, pps.mean, pps.sd);
    if (o.n_gen > 0)
      std::printf("| %s | %s | %s | %d | tg%d | %.2f +/- %.2f |\n", name.c_str(), wtype.c_str(),
                  kernels::IsaName(kernels::ActiveIsa()), pool.size(), o.n_gen, tgs.mean, tgs.sd);
    std::printf("\nread bandwidth (%d threads, %d MiB): %.2f GB/s; bytes per decoded token %.1f MB "
                "(weights %.1f MB + KV %.1f MB); decode efficiency %.1f%%\n",
                pool.size(), o.bw_mib, bw / 1e9, tok_bytes / 1e6, static_cast<double>(m.WeightBytes()) / 1e6,
                kv_bytes / 1e6, eff * 100);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Runner AddBenchModelOptions(CLI::App& bench) {
  auto o = std::make_shared<BenchOpts>();
  // Not required(): `ferry bench throughput -m ...` is a nested subcommand; RunBench checks it.
  bench.add_option("-m,--model", o->model, "model file (GGUF, Hugging Face folder or llama2.c .bin)");
  bench.add_option("-p,--n-prompt", o->n_prompt, "prompt tokens for prefill (0: skip prefill)")->capture_default_str();
  bench.add_option("-n,--n-gen", o->n_gen, "tokens to decode (0: skip decode)")->capture_default_str();
  bench.add_option("-r,--repetitions", o->reps, "repetitions of each test")->capture_default_str();
  bench.add_option("-t,--threads", o->threads, "threads (default: physical cores)")->check(CLI::NonNegativeNumber);
  bench.add_option("-b,--batch", o->n_batch, "prompt tokens per forward pass")->capture_default_str();
  bench.add_option("--bw-mib", o->bw_mib, "bandwidth probe buffer in MiB")->capture_default_str()->check(CLI::Range(16, 65536));
  bench.add_flag("--json", o->json, "one JSON object per line");
  bench.add_flag("--no-repack", o->no_repack, "compute q4_0/q8_0 weights in place from the file (no repacked copy)");
  return [o]() -> int { return RunBench(*o); };
}

}  // namespace ferry::cli
