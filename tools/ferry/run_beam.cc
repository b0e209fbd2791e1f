#include "run_beam.h"

#include <cstdio>

#include "base/timer.h"
#include "commands.h"

namespace ferry::cli {

int RunBeamSearch(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& prompt,
                  const GenerateOptions& gen, BeamSearchOptions beam) {
  if (gen.n_predict <= 0)
    return Fail(InvalidArgumentError("beam search needs a positive -n (new tokens per hypothesis), got {}",
                                     gen.n_predict));
  beam.max_tokens = gen.n_predict;
  const Tokenizer& tok = *lm.tokenizer;
  if (!gen.ignore_eos)
    for (int32_t id = 0; id < lm.config().n_vocab; ++id)
      if (tok.IsEog(id)) beam.end_tokens.push_back(id);
  BeamSearchStats stats;
  Timer timer;
  auto beams = BeamSearch(*lm.model, &pool, prompt, beam, &stats);
  if (!beams.ok()) return Fail(beams.status());
  for (size_t i = 0; i < beams->size(); ++i) {
    const BeamHypothesis& h = (*beams)[i];
    std::vector<int32_t> ids(h.tokens);
    if (h.finish_reason == "stop" && !ids.empty()) ids.pop_back();  // the end token is not text
    std::printf("[beam %zu] score %.4f logprob %.4f tokens %zu (%s)\n%s\n", i, h.score, h.cum_logprob,
                h.tokens.size(), h.finish_reason.c_str(), tok.Decode(ids).c_str());
  }
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "\nferry: beam search width %d, prompt tokens %zu, %d steps in %.1f ms, KV blocks peak %d of %d "
      "unshared, %d copy-on-write copies, threads %d\n",
      beam.beam_width, prompt.size(), stats.steps, timer.Seconds() * 1e3, stats.peak_blocks,
      stats.unshared_blocks, stats.block_copies, pool.size());
  return 0;
}

}  // namespace ferry::cli
