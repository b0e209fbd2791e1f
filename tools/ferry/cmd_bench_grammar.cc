// `ferry bench grammar`: compile time and per-token mask time of a constraint over a model's
// vocabulary, along random walks through the grammar (each step takes a uniformly random
// allowed token). Walks are replayed a second time with the per-context token sets warm, so
// the report separates first-use work from steady state.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "commands.h"
#include "constraint/matcher.h"
#include "constraint_flags.h"
#include "engine/constraint_vocab.h"

namespace ferry::cli {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Summary {
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};

Summary Summarize(std::vector<double> us) {
  Summary s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  for (double x : us) s.mean += x;
  s.mean /= static_cast<double>(us.size());
  s.p50 = us[us.size() / 2];
  s.p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  s.max = us.back();
  return s;
}

nlohmann::json ToJson(const Summary& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max}};
}

}  // namespace

Runner AddBenchGrammarCommand(CLI::App& bench) {
  struct Opts {
    ModelFlags model;
    ConstraintFlags constraint;
    int steps = 2000;
    int max_walk = 200;
    uint64_t seed = 1;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      bench.add_subcommand("grammar", "constraint compile time and token-mask time over random walks");
  o->model.Add(cmd, /*with_threads=*/false);
  o->constraint.Add(cmd, "--schema");
  cmd->add_option("--steps", o->steps, "masks to compute")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-walk", o->max_walk, "tokens per walk before starting a new one")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "walk RNG seed")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object");

  return [o]() -> int {
    auto spec = o->constraint.ToSpec();
    if (!spec.ok()) return Fail(spec.status());
    if (!*spec)
      return Fail(
          InvalidArgumentError("bench grammar needs one of --schema FILE, --grammar FILE, --regex R"));
    auto src = OpenWithTokenizer(o->model.model, LoadOptions{o->model.tokenizer});
    if (!src.ok()) return Fail(src.status());
    auto tok = Tokenizer::FromMetadata((*src)->metadata());
    if (!tok.ok()) return Fail(tok.status());
    auto t0 = std::chrono::steady_clock::now();
    auto vocab = ConstraintVocabulary(*tok);
    auto t1 = std::chrono::steady_clock::now();
    auto program = constraint::CompileSpec(**spec);
    if (!program.ok()) return Fail(program.status());
    auto compiled = constraint::CompiledGrammar::Create(std::move(program).value(), vocab);
    if (!compiled.ok()) return Fail(compiled.status());
    std::shared_ptr<const constraint::CompiledGrammar> grammar = *std::move(compiled);
    auto t2 = std::chrono::steady_clock::now();

    std::mt19937_64 rng(o->seed);
    std::vector<std::vector<int32_t>> walks(1);
    std::vector<double> cold_us, warm_us;
    std::vector<uint64_t> mask;
    auto matcher = std::make_unique<constraint::Matcher>(grammar);
    mask.resize(matcher->mask_words());
    size_t allowed_total = 0;
    for (int step = 0; step < o->steps; ++step) {
      if (matcher->terminated() || static_cast<int>(walks.back().size()) >= o->max_walk) {
        matcher = std::make_unique<constraint::Matcher>(grammar);
        walks.emplace_back();
      }
      auto a = std::chrono::steady_clock::now();
      matcher->FillMask(mask);
      auto b = std::chrono::steady_clock::now();
      cold_us.push_back(Seconds(a, b) * 1e6);
      std::vector<int32_t> allowed;
      for (size_t w = 0; w < mask.size(); ++w)
        for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
          allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
      allowed_total += allowed.size();
      if (allowed.empty())
        return Fail(InternalError("bench grammar: no token allowed after {} steps", walks.back().size()));
      int32_t t = allowed[rng() % allowed.size()];
      walks.back().push_back(t);
      if (!matcher->AcceptToken(t)) return Fail(InternalError("bench grammar: an allowed token was refused"));
    }
    // The same walks again: every context key is now cached.
    for (const auto& walk : walks) {
      constraint::Matcher m(grammar);
      for (int32_t t : walk) {
        auto a = std::chrono::steady_clock::now();
        m.FillMask(mask);
        auto b = std::chrono::steady_clock::now();
        warm_us.push_back(Seconds(a, b) * 1e6);
        m.AcceptToken(t);
      }
    }
    Summary cold = Summarize(cold_us), warm = Summarize(warm_us);
    double compile_ms = Seconds(t1, t2) * 1e3, vocab_ms = Seconds(t0, t1) * 1e3;
    if (o->json) {
      nlohmann::json j = {{"n_vocab", vocab->size()},
                          {"vocab_ms", vocab_ms},
                          {"compile_ms", compile_ms},
                          {"steps", o->steps},
                          {"walks", walks.size()},
                          {"contexts", grammar->num_contexts()},
                          {"mean_allowed", static_cast<double>(allowed_total) / o->steps},
                          {"mask_us", ToJson(cold)},
                          {"mask_warm_us", ToJson(warm)}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("vocabulary: %d tokens (%.1f ms to index)\ncompile: %.3f ms\n", vocab->size(), vocab_ms,
                  compile_ms);
      std::printf("masks: %d over %zu walks, %zu context keys, %.0f tokens allowed on average\n", o->steps,
                  walks.size(), grammar->num_contexts(), static_cast<double>(allowed_total) / o->steps);
      std::printf(
          "mask time, first pass (contexts computed on first use): mean %.1f us, p50 %.1f us, p99 %.1f us, "
          "max %.1f us\n",
          cold.mean, cold.p50, cold.p99, cold.max);
      std::printf(
          "mask time, replay (contexts cached):                    mean %.1f us, p50 %.1f us, p99 %.1f us, "
          "max %.1f us\n",
          warm.mean, warm.p50, warm.p99, warm.max);
    }
    return 0;
  };
}

}  // namespace ferry::cli
