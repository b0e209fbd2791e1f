// `ferry run`: generate text from a prompt, streamed to stdout; stats to stderr.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "constraint_flags.h"
#include "core/thread_pool.h"
#include "engine/constraint_vocab.h"
#include "engine/engine_core.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "parallel_flags.h"
#include "run_beam.h"

namespace ferry::cli {
namespace {

// Speculative decoding runs on the serving engine (paged KV, one request): prints the text as
// it streams and a stats line with the speculation figures. Returns the exit code.
int RunSpeculative(LoadedModel& lm, const std::vector<int32_t>& prompt, const GenerateOptions& gen,
                   const spec::SpecConfig& sc, int threads, bool tty) {
  const int32_t n_ctx = EffectiveContext(lm.config(), gen.n_ctx);
  EngineConfig ec;
  ec.threads = threads;
  ec.kv_types = gen.kv_types;
  ec.scheduler.max_seq_len = n_ctx;
  ec.scheduler.max_num_seqs = 1;
  ec.scheduler.max_batch_tokens = std::max(gen.n_batch, sc.num_tokens + 1);
  ec.num_blocks = (n_ctx + ec.block_size - 1) / ec.block_size + 1;
  ec.spec = sc;
  auto core = EngineCore::Create(*lm.model, &*lm.tokenizer, ec);
  if (!core.ok()) return Fail(core.status());
  RequestOptions ro;
  ro.sampling = gen.sampling;
  ro.max_tokens = gen.n_predict < 0 ? n_ctx - static_cast<int32_t>(prompt.size()) : gen.n_predict;
  ro.stop = gen.stop;
  ro.ignore_eos = gen.ignore_eos;
  if (Status s = (*core)->Validate(prompt, ro); !s.ok()) return Fail(s);
  (*core)->Add(0, prompt, ro, (*core)->Now());
  RequestMetrics m;
  std::string reason;
  while ((*core)->HasWork()) {
    auto outs = (*core)->Step();
    if (!outs.ok()) return Fail(outs.status());
    for (const RequestOutput& o : *outs) {
      std::fwrite(o.text.data(), 1, o.text.size(), stdout);
      std::fflush(stdout);
      if (o.finished) {
        m = o.metrics;
        reason = o.finish_reason;
      }
    }
  }
  if (tty) std::fputc('\n', stdout);
  std::fflush(stdout);
  const EngineStats st = (*core)->Stats();
  const double decode_tps = m.output_tokens > 1 && m.tpot_s > 0 ? 1.0 / m.tpot_s : 0.0;
  std::fprintf(stderr,
               "\nferry: prompt tokens %d, generated %d (%s), TTFT %.1f ms, decode %.1f tok/s, threads %d; "
               "speculative (%s, K %d): acceptance %.1f%%, mean accepted %.2f per verification (%lld), "
               "draft %.1f ms, verify %.1f ms\n",
               m.prompt_tokens, m.output_tokens, reason.c_str(), m.ttft_s * 1e3, decode_tps, threads,
               (*core)->proposer()->name(), sc.num_tokens, st.SpecAcceptanceRate() * 100,
               st.SpecMeanAcceptedTokens(), static_cast<long long>(st.spec_verifications),
               st.spec_draft_s * 1e3, st.spec_verify_s * 1e3);
  return 0;
}

}  // namespace

Runner AddRunCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::string prompt;
    GenerateOptions gen;
    SpecFlags spec;
    bool no_special = false;
    BeamSearchOptions beam;
    ConstraintFlags constraint;
    ParallelFlags parallel;
  };
  auto o = std::make_shared<Opts>();
  o->beam.beam_width = 0;  // off unless --beam-width
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  o->model.Add(cmd, /*with_threads=*/true, /*default_model=*/true);
  SamplingParams& s = o->gen.sampling;
  cmd->add_option("-p,--prompt", o->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict", o->gen.n_predict, "tokens to generate (-1: until end of text)")
      ->capture_default_str();
  cmd->add_option("--temp", s.temperature, "temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", s.top_k, "top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "top-p (1: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", s.min_p, "min-p (0: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "tokens the repetition penalty looks back")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty, "presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "frequency penalty")->capture_default_str();
  cmd->add_option("-s,--seed", s.seed, "RNG seed (same seed, same output)");
  cmd->add_option("--stop", o->gen.stop, "stop string (repeatable)");
  cmd->add_option("-c,--ctx", o->gen.n_ctx, "context size (0: model's, capped at 4096)")
      ->capture_default_str();
  cmd->add_option("-b,--batch", o->gen.n_batch, "prompt tokens per forward pass")->capture_default_str();
  cmd->add_flag("--ignore-eos", o->gen.ignore_eos, "keep generating past end-of-text");
  cmd->add_option("--beam-width", o->beam.beam_width,
                  "beam search with this many beams (prints each hypothesis)");
  cmd->add_option("--length-penalty", o->beam.length_penalty, "beam score = logprob / length^penalty")
      ->capture_default_str();
  cmd->add_flag("--no-parse-special", o->no_special, "treat special-token text in the prompt as plain text");
  o->spec.Add(cmd);
  o->constraint.Add(cmd, "--json-schema");
  o->parallel.Add(cmd);

  return [o]() -> int {
    o->model.model = o->model.ModelOrDefault();
    auto kv_types = o->model.kv_cache.ToTypes();
    if (!kv_types.ok()) return Fail(kv_types.status());
    o->gen.kv_types = o->beam.kv_types = *kv_types;
    auto spec = o->constraint.ToSpec();
    if (!spec.ok()) return Fail(spec.status());
    auto par = OpenParallelRun(o->parallel);
    if (!par.ok()) return Fail(par.status());
    if (par->split() && (o->beam.beam_width > 0 || o->spec.enabled()))
      return par->Fail(
          UnsupportedError("--beam-width and speculative decoding do not run split over ranks yet"));
    auto seed = par->AgreeOnSeed(o->gen.sampling.seed);
    if (!seed.ok()) return par->Fail(seed.status());
    o->gen.sampling.seed = *seed;
    LoadOptions load = o->model.ToLoadOptions();
    load.parallel = par->layout();
    auto lm = LoadModel(o->model.model, load);
    if (!lm.ok()) return par->Fail(lm.status());
    par->PrintRankMemory(*lm->model, *kv_types);
    auto grammar = ConstraintFlags::Compile(*spec, *lm->tokenizer);
    if (!grammar.ok()) return Fail(grammar.status());
    o->gen.sampling.constraint = *grammar;
    o->beam.constraint = *grammar;
    ThreadPool pool(o->model.threads);
    std::vector<int32_t> prompt = lm->tokenizer->Encode(o->prompt, true, !o->no_special);
    if (o->beam.beam_width > 0) return RunBeamSearch(*lm, pool, prompt, o->gen, o->beam);
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    if (o->spec.enabled()) {
      SpecDraft draft;
      spec::SpecConfig sc;
      if (Status s = o->spec.Apply(*lm, o->model.ToLoadOptions(), &pool, draft, sc); !s.ok()) return Fail(s);
      return RunSpeculative(*lm, prompt, o->gen, sc, pool.size(), tty);
    }
    const bool root = par->root();  // every rank generates the same tokens; one prints them
    auto stats = Generate(*lm, pool, prompt, o->gen, [root](std::string_view text) {
      if (!root) return;
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    if (!stats.ok()) return par->Fail(stats.status());
    if (!root) return 0;
    if (tty) std::fputc('\n', stdout);
    std::fflush(stdout);
    const GenerateStats& st = *stats;
    double decode_tps =
        st.generated_tokens > 1 && st.decode_s > 0 ? (st.generated_tokens - 1) / st.decode_s : 0.0;
    std::fprintf(
        stderr,
        "\nferry: prompt tokens %d, generated %d (%s), TTFT %.1f ms, prefill %.1f tok/s, decode %.1f tok/s, "
        "threads %d\n",
        st.prompt_tokens, st.generated_tokens, st.finish_reason.c_str(), st.ttft_s * 1e3,
        st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0.0, decode_tps, pool.size());
    if (std::string sp = SparsityReport(*lm->model, st.sparsity); !sp.empty())
      std::fprintf(stderr, "ferry: %s\n", sp.c_str());
    return 0;
  };
}

}  // namespace ferry::cli
