// `ferry ppl`: perplexity over a text file, computed as llama.cpp's llama-perplexity does.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/progress.h"
#include "base/timer.h"
#include "commands.h"
#include "engine/loaded_model.h"
#include "engine/perplexity.h"

namespace ferry::cli {

Runner AddPplCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::string file;
    PerplexityOptions ppl;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("ppl", "perplexity of a model over a text file");
  o->model.Add(cmd);
  cmd->add_option("-f,--file", o->file, "text file")->required();
  cmd->add_option("-c,--ctx", o->ppl.n_ctx, "window size in tokens")->capture_default_str();
  cmd->add_option("-b,--batch", o->ppl.n_batch, "tokens per forward pass")->capture_default_str();
  cmd->add_option("--chunks", o->ppl.max_chunks, "evaluate at most this many windows (-1: all)")->capture_default_str();

  return [o]() -> int {
    auto kv_types = o->model.kv_cache.ToTypes();
    if (!kv_types.ok()) return Fail(kv_types.status());
    o->ppl.kv_types = *kv_types;
    std::ifstream in(o->file, std::ios::binary);
    if (!in) return Fail(IoError("cannot open text file '{}'", o->file));
    std::stringstream ss;
    ss << in.rdbuf();
    auto lm = LoadModel(o->model.model, o->model.ToLoadOptions());
    if (!lm.ok()) return Fail(lm.status());
    ThreadPool pool(o->model.threads);
    Timer timer;
    std::vector<int32_t> tokens = lm->tokenizer->Encode(ss.str(), true, false);
    std::fprintf(stderr, "ferry: tokenized %zu bytes into %zu tokens in %.2f s\n", ss.str().size(), tokens.size(),
                 timer.Seconds());
    const bool tty = StderrIsTerminal();
    std::unique_ptr<ProgressBar> bar;
    o->ppl.progress = [&](int32_t done, int32_t total, double ppl) {
      if (tty) {
        if (!bar) bar = std::make_unique<ProgressBar>("perplexity", total, true);
        bar->Update(done, fmt::format("[{}/{}] ppl {:.4f}", done, total, ppl));
      } else if (done == total || done % 100 == 1) {
        std::fprintf(stderr, "ferry: [%d/%d] running ppl %.4f\n", done, total, ppl);
      }
    };
    timer.Reset();
    auto r = Perplexity(*lm, pool, tokens, o->ppl);
    if (bar) bar->Finish();
    if (!r.ok()) return Fail(r.status());
    std::fprintf(stderr, "ferry: %d windows of %d tokens, %lld predictions scored, %.1f s (%.0f tok/s)\n", r->n_chunks,
                 o->ppl.n_ctx, static_cast<long long>(r->n_scored), timer.Seconds(),
                 r->n_chunks * static_cast<double>(o->ppl.n_ctx) / timer.Seconds());
    if (std::string sp = SparsityReport(*lm->model); !sp.empty()) std::fprintf(stderr, "ferry: %s\n", sp.c_str());
    std::printf("PPL = %.4f +/- %.4f\n", r->ppl, r->ppl_stderr);
    return 0;
  };
}

}  // namespace ferry::cli
