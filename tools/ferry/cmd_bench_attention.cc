// `ferry bench attention -m PATH -p DEPTH [-f TEXT] [--config SPEC ...]`: decode speed at a
// given context depth with attention sparsity (docs/sparsity.md) against dense, in one process.
// Every configuration gets its own model instance and KV cache, prefilled with the same DEPTH
// tokens (the start of TEXT, or random tokens); then each round times one decode step (the
// token at position DEPTH, rewritten each time) of every configuration in turn, the order
// rotated per round, so machine load hits all of them alike. Reported per configuration: the
// median step time, the median of its per-round ratio to dense, and what the decode steps
// skipped (SparsityJson, prefill excluded).
// SPEC: comma-separated keys: skip=T, progressive=MARGIN, prune=F (with --head-importance).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/timer.h"
#include "commands.h"
#include "core/median.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"

namespace ferry::cli {
namespace {

struct AttnBenchOpts {
  std::string model, text, head_importance;
  std::vector<std::string> configs;
  int depth = 2048, rounds = 20, threads = 0;
  bool json = false;
};

StatusOr<SparsityOptions> ParseConfig(const std::string& spec, const std::string& importance) {
  SparsityOptions o;
  std::stringstream ss(spec);
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos)
      return InvalidArgumentError("--config '{}': '{}' is not key=value (skip=T, progressive=M, prune=F)",
                                  spec, kv);
    const std::string key = kv.substr(0, eq);
    double v = 0;
    try {
      v = std::stod(kv.substr(eq + 1));
    } catch (const std::exception&) {
      return InvalidArgumentError("--config '{}': '{}' is not a number", spec, kv.substr(eq + 1));
    }
    if (key == "skip") {
      o.attn_skip_threshold = static_cast<float>(v);
    } else if (key == "progressive") {
      o.attn_progressive = true;
      o.attn_progressive_margin = static_cast<float>(v);
    } else if (key == "prune") {
      o.prune_heads = v;
      o.head_importance = importance;
    } else {
      return InvalidArgumentError("--config '{}': unknown key '{}' (skip, progressive, prune)", spec, key);
    }
  }
  return o;
}

struct Instance {
  std::string name;
  LoadedModel lm;
  std::unique_ptr<ContiguousKvCache> kv;
  SparsityStats stats;  // decode steps only
  ForwardScratch scratch;
  std::vector<double> ms;     // per round
  std::vector<double> ratio;  // per round: ms / dense ms
};

int RunAttentionBench(const AttnBenchOpts& o) {
  if (o.depth < 1 || o.rounds < 1) return Fail(InvalidArgumentError("-p and -r must be >= 1"));
  std::vector<std::string> names = {""};
  names.insert(names.end(), o.configs.begin(), o.configs.end());
  ThreadPool pool(o.threads);
  std::vector<std::unique_ptr<Instance>> runs;
  std::vector<int32_t> tokens;
  for (const std::string& spec : names) {
    auto sp = ParseConfig(spec, o.head_importance);
    if (!sp.ok()) return Fail(sp.status());
    LoadOptions lo;
    lo.sparsity = *sp;
    auto lm = LoadModel(o.model, lo);
    if (!lm.ok()) return Fail(lm.status());
    auto r = std::make_unique<Instance>();
    r->name = spec.empty() ? "dense" : spec;
    r->lm = std::move(*lm);
    const ModelConfig& c = r->lm.config();
    if (tokens.empty()) {
      if (!o.text.empty() && r->lm.tokenizer) {
        std::ifstream f(o.text, std::ios::binary);
        if (!f) return Fail(IoError("cannot open '{}'", o.text));
        std::stringstream ss;
        ss << f.rdbuf();
        tokens = r->lm.tokenizer->Encode(ss.str(), true, false);
      }
      std::mt19937 rng(42);
      std::uniform_int_distribution<int32_t> tok(3, c.n_vocab - 1);
      while (static_cast<int>(tokens.size()) < o.depth + 1) tokens.push_back(tok(rng));
    }
    auto kv = ContiguousKvCache::Create(c.n_layers, 1, o.depth + 1, c.n_kv_heads, c.head_dim);
    if (!kv.ok()) return Fail(kv.status());
    r->kv = std::make_unique<ContiguousKvCache>(std::move(*kv));
    std::vector<float> logits(static_cast<size_t>(c.n_vocab));
    for (int s = 0; s < o.depth; s += 512) {  // prefill, logits of the last token only
      ForwardBatch b;
      const int e = std::min(o.depth, s + 512);
      for (int i = s; i < e; ++i) b.Add(tokens[static_cast<size_t>(i)], i, 0, i + 1 == e);
      if (Status st = r->lm.model->Forward(b, *r->kv, logits.data(), &pool); !st.ok()) return Fail(st);
    }
    runs.push_back(std::move(r));
  }
  std::vector<float> logits;
  for (int round = 0; round < o.rounds + 1; ++round) {  // round 0 warms up
    std::vector<double> ms(runs.size());
    for (size_t j = 0; j < runs.size(); ++j) {
      const size_t i = (j + static_cast<size_t>(round)) % runs.size();
      Instance& r = *runs[i];
      logits.resize(static_cast<size_t>(r.lm.config().n_vocab));
      ForwardBatch b;
      b.Add(tokens[static_cast<size_t>(o.depth)], o.depth, 0, true);
      Timer t;
      ForwardOptions fo;
      fo.stats = &r.stats;
      fo.scratch = &r.scratch;
      if (Status st = r.lm.model->Forward(b, *r.kv, logits.data(), &pool, fo); !st.ok()) return Fail(st);
      ms[i] = t.Millis();
    }
    if (round == 0) {
      for (auto& r : runs) r->stats = SparsityStats{};
      continue;
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      runs[i]->ms.push_back(ms[i]);
      runs[i]->ratio.push_back(ms[0] / ms[i]);
    }
  }
  if (!o.json)
    std::printf("%-32s %12s %12s %14s  skipped (decode steps)\n", "config", "ms/token", "tok/s",
                "speedup vs dense");
  for (const auto& r : runs) {
    const double m = Median(r->ms), sp = Median(r->ratio);
    const std::string rep = SparsityReport(*r->lm.model, r->stats);
    if (o.json) {
      nlohmann::json j = {{"config", r->name},      {"depth", o.depth},
                          {"rounds", o.rounds},     {"threads", pool.size()},
                          {"ms_per_token", m},      {"tokens_per_s", 1e3 / m},
                          {"speedup_vs_dense", sp}, {"sparsity", SparsityJson(*r->lm.model, r->stats)}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%-32s %12.3f %12.1f %13.2fx  %s\n", r->name.c_str(), m, 1e3 / m, sp, rep.c_str());
    }
  }
  return 0;
}

}  // namespace

Runner AddBenchAttentionCommand(CLI::App& bench) {
  auto o = std::make_shared<AttnBenchOpts>();
  CLI::App* cmd = bench.add_subcommand(
      "attention",
      "decode speed at a context depth with attention sparsity vs dense, interleaved in one process");
  cmd->add_option("-m,--model", o->model, "model file")->required();
  cmd->add_option("-p,--depth", o->depth, "context depth: tokens in the KV cache before the timed step")
      ->capture_default_str();
  cmd->add_option("-f,--file", o->text, "text whose tokens fill the context (default: random tokens)");
  cmd->add_option("-r,--rounds", o->rounds, "timed decode steps per configuration")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)");
  cmd->add_option(
      "--config", o->configs,
      "a sparse configuration, e.g. skip=0.01 | progressive=4 | prune=0.25 | skip=0.01,progressive=4 "
      "(repeatable; dense is always measured)");
  cmd->add_option("--head-importance", o->head_importance, "STATS file of `ferry calibrate` for prune=F");
  cmd->add_flag("--json", o->json, "one JSON object per configuration");
  return [o]() -> int { return RunAttentionBench(*o); };
}

}  // namespace ferry::cli
