// `ferry run`: generate text from a prompt, streamed to stdout; stats to stderr.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace ferry::cli {

Runner AddRunCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::string prompt;
    GenerateOptions gen;
    bool no_special = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  o->model.Add(cmd);
  SamplingParams& s = o->gen.sampling;
  cmd->add_option("-p,--prompt", o->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict", o->gen.n_predict, "tokens to generate (-1: until end of text)")->capture_default_str();
  cmd->add_option("--temp", s.temperature, "temperature (0: greedy)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", s.top_k, "top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "top-p (1: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", s.min_p, "min-p (0: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "tokens the repetition penalty looks back")->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty, "presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "frequency penalty")->capture_default_str();
  cmd->add_option("-s,--seed", s.seed, "RNG seed (same seed, same output)");
  cmd->add_option("--stop", o->gen.stop, "stop string (repeatable)");
  cmd->add_option("-c,--ctx", o->gen.n_ctx, "context size (0: model's, capped at 4096)")->capture_default_str();
  cmd->add_option("-b,--batch", o->gen.n_batch, "prompt tokens per forward pass")->capture_default_str();
  cmd->add_flag("--ignore-eos", o->gen.ignore_eos, "keep generating past end-of-text");
  cmd->add_flag("--no-parse-special", o->no_special, "treat special-token text in the prompt as plain text");

  return [o]() -> int {
    auto lm = LoadModel(o->model.model, o->model.ToLoadOptions());
    if (!lm.ok()) return Fail(lm.status());
    ThreadPool pool(o->model.threads);
    std::vector<int32_t> prompt = lm->tokenizer->Encode(o->prompt, true, !o->no_special);
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    auto stats = Generate(*lm, pool, prompt, o->gen, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    if (!stats.ok()) return Fail(stats.status());
    if (tty) std::fputc('\n', stdout);
    std::fflush(stdout);
    const GenerateStats& st = *stats;
    double decode_tps = st.generated_tokens > 1 && st.decode_s > 0 ? (st.generated_tokens - 1) / st.decode_s : 0.0;
    std::fprintf(stderr,
                 "\nferry: prompt tokens %d, generated %d (%s), TTFT %.1f ms, prefill %.1f tok/s, decode %.1f tok/s, "
                 "threads %d\n",
                 st.prompt_tokens, st.generated_tokens, st.finish_reason.c_str(), st.ttft_s * 1e3,
                 st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0.0, decode_tps, pool.size());
    return 0;
  };
}

}  // namespace ferry::cli
