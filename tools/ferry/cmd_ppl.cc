// `ferry ppl`: perplexity over a text file, computed as llama.cpp's llama-perplexity does.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <utility>

#include "base/progress.h"
#include "base/timer.h"
#include "commands.h"
#include "engine/kl_divergence.h"
#include "engine/loaded_model.h"
#include "engine/perplexity.h"
#include "parallel_flags.h"

namespace ferry::cli {
namespace {

// The KL-divergence and token-probability statistics in llama-perplexity's labels and order, so
// the two tools' reports can be read side by side.
void PrintKlStatistics(const KlDivergenceResult& kl) {
  using Row = std::pair<const char*, double>;
  const Percentiles &k = kl.kld, &d = kl.dp;
  std::printf("====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", kl.mean_kld, kl.kld_stderr);
  for (const auto& [label, v] :
       {Row{"Maximum", k.max}, Row{"99.9%  ", k.p99_9}, Row{"99.0%  ", k.p99}, Row{"95.0%  ", k.p95},
        Row{"90.0%  ", k.p90}, Row{"Median ", k.median}, Row{"10.0%  ", k.p10}, Row{" 5.0%  ", k.p5},
        Row{" 1.0%  ", k.p1}, Row{" 0.1%  ", k.p0_1}, Row{"Minimum", k.min}})
    std::printf("%s KLD: %10.6f\n", label, v);
  std::printf("====== Token probability statistics ======\n");
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * kl.mean_dp, 100 * kl.dp_stderr);
  for (const auto& [label, v] :
       {Row{"Maximum", d.max}, Row{"99.9%  ", d.p99_9}, Row{"99.0%  ", d.p99}, Row{"95.0%  ", d.p95},
        Row{"90.0%  ", d.p90}, Row{"75.0%  ", d.p75}, Row{"Median ", d.median}, Row{"25.0%  ", d.p25},
        Row{"10.0%  ", d.p10}, Row{" 5.0%  ", d.p5}, Row{" 1.0%  ", d.p1}, Row{" 0.1%  ", d.p0_1},
        Row{"Minimum", d.min}})
    std::printf("%s Δp: %6.3f%%\n", label, 100 * v);
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * kl.rms_dp, 100 * kl.rms_dp_stderr);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100 * kl.top1_agreement, 100 * kl.top1_stderr);
}

}  // namespace

Runner AddPplCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::string file;
    std::string kl_base;
    PerplexityOptions ppl;
    ParallelFlags parallel;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("ppl", "perplexity of a model over a text file");
  o->model.Add(cmd);
  cmd->add_option("-f,--file", o->file, "text file")->required();
  cmd->add_option("-c,--ctx", o->ppl.n_ctx, "window size in tokens")->capture_default_str();
  cmd->add_option("-b,--batch", o->ppl.n_batch, "tokens per forward pass")->capture_default_str();
  cmd->add_option("--chunks", o->ppl.max_chunks, "evaluate at most this many windows (-1: all)")
      ->capture_default_str();
  cmd->add_option("--kl-divergence-base", o->kl_base,
                  "logits file as llama-perplexity --kl-divergence-base writes it: compared with when it "
                  "exists (mean KL divergence, top-1 agreement, delta PPL on its tokens), else written from "
                  "this run's f32 logits");
  o->parallel.Add(cmd);

  return [o]() -> int {
    auto kv_types = o->model.kv_cache.ToTypes();
    if (!kv_types.ok()) return Fail(kv_types.status());
    o->ppl.kv_types = *kv_types;
    std::ifstream in(o->file, std::ios::binary);
    if (!in) return Fail(IoError("cannot open text file '{}'", o->file));
    std::stringstream ss;
    ss << in.rdbuf();
    auto par = OpenParallelRun(o->parallel);
    if (!par.ok()) return Fail(par.status());
    if (par->split() && !o->kl_base.empty())
      return par->Fail(UnsupportedError("--kl-divergence-base does not run split over ranks yet"));
    LoadOptions load = o->model.ToLoadOptions();
    load.parallel = par->layout();
    auto lm = LoadModel(o->model.model, load);
    if (!lm.ok()) return par->Fail(lm.status());
    par->PrintRankMemory(*lm->model, *kv_types);
    ThreadPool pool(o->model.threads);
    Timer timer;
    std::vector<int32_t> tokens = lm->tokenizer->Encode(ss.str(), true, false);
    if (par->root())
      std::fprintf(stderr, "ferry: tokenized %zu bytes into %zu tokens in %.2f s\n", ss.str().size(),
                   tokens.size(), timer.Seconds());
    const bool tty = StderrIsTerminal();
    std::unique_ptr<ProgressBar> bar;
    o->ppl.progress = [&](int32_t done, int32_t total, double ppl) {
      if (!par->root()) return;  // every rank computes the same figures
      if (tty) {
        if (!bar) bar = std::make_unique<ProgressBar>("perplexity", total, true);
        bar->Update(done, fmt::format("[{}/{}] ppl {:.4f}", done, total, ppl));
      } else if (done == total || done % 100 == 1) {
        std::fprintf(stderr, "ferry: [%d/%d] running ppl %.4f\n", done, total, ppl);
      }
    };
    std::unique_ptr<KlBaseReader> kl_in;
    std::unique_ptr<KlBaseWriter> kl_out;
    if (!o->kl_base.empty()) {
      const int32_t n_ctx = o->ppl.n_ctx, n_vocab = lm->config().n_vocab;
      if (std::ifstream(o->kl_base).good()) {  // compare on the base's tokens
        auto rd = KlBaseReader::Open(o->kl_base);
        if (!rd.ok()) return Fail(rd.status());
        kl_in = std::move(*rd);
        const KlBaseHeader& h = kl_in->header();
        if (static_cast<int32_t>(h.n_ctx) != n_ctx)
          return Fail(InvalidArgumentError("'{}' was written with windows of {} tokens; run with --ctx {}",
                                           o->kl_base, h.n_ctx, h.n_ctx));
        if (h.n_vocab != n_vocab)
          return Fail(InvalidArgumentError("'{}' has a vocabulary of {}, the model {}", o->kl_base, h.n_vocab,
                                           n_vocab));
        if (tokens.size() < h.tokens.size() || !std::equal(h.tokens.begin(), h.tokens.end(), tokens.begin()))
          std::fprintf(stderr,
                       "ferry: note: the text tokenizes differently from '%s'; evaluating its tokens\n",
                       o->kl_base.c_str());
        tokens = h.tokens;
        o->ppl.max_chunks = h.n_chunk;
        o->ppl.on_scored_rows = [&](const float* logits, int32_t n, const int32_t* targets) {
          return kl_in->CompareRows(logits, targets, n);
        };
      } else {
        KlBaseHeader h;
        h.n_ctx = static_cast<uint32_t>(n_ctx);
        h.n_vocab = n_vocab;
        h.n_chunk = static_cast<int32_t>(tokens.size() / static_cast<size_t>(std::max(n_ctx, 1)));
        if (o->ppl.max_chunks >= 0) h.n_chunk = std::min(h.n_chunk, o->ppl.max_chunks);
        h.tokens.assign(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(h.n_chunk) * n_ctx);
        auto wr = KlBaseWriter::Create(o->kl_base, h);
        if (!wr.ok()) return Fail(wr.status());
        kl_out = std::move(*wr);
        o->ppl.on_scored_rows = [&](const float* logits, int32_t n, const int32_t*) {
          return kl_out->AddRows(logits, n);
        };
      }
    }
    timer.Reset();
    auto r = Perplexity(*lm, pool, tokens, o->ppl);
    if (bar) bar->Finish();
    if (!r.ok()) return par->Fail(r.status());
    if (!par->root()) return 0;
    std::fprintf(stderr, "ferry: %d windows of %d tokens, %lld predictions scored, %.1f s (%.0f tok/s)\n",
                 r->n_chunks, o->ppl.n_ctx, static_cast<long long>(r->n_scored), timer.Seconds(),
                 r->n_chunks * static_cast<double>(o->ppl.n_ctx) / timer.Seconds());
    if (std::string sp = SparsityReport(*lm->model, r->sparsity); !sp.empty())
      std::fprintf(stderr, "ferry: %s\n", sp.c_str());
    if (kl_out) {
      if (Status st = kl_out->Close(); !st.ok()) return Fail(st);
      std::fprintf(stderr, "ferry: wrote the logits of %d windows to '%s'\n", r->n_chunks,
                   o->kl_base.c_str());
    }
    if (kl_in) {
      auto kl = kl_in->Finish();
      if (!kl.ok()) return Fail(kl.status());
      std::printf(
          "KLD = %.6f +/- %.6f, top-1 agreement %.3f%%, PPL %.4f vs base %.4f (delta %+.4f), %lld "
          "positions\n",
          kl->mean_kld, kl->kld_stderr, 100.0 * kl->top1_agreement, kl->ppl, kl->ppl_base, kl->delta_ppl(),
          static_cast<long long>(kl->count));
      PrintKlStatistics(*kl);
    }
    std::printf("PPL = %.4f +/- %.4f\n", r->ppl, r->ppl_stderr);
    return 0;
  };
}

}  // namespace ferry::cli
