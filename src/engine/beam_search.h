// BeamSearch: deterministic beam search over the paged KV cache. Every beam is a KvSequence;
// children fork their parent's block table (shared blocks, reference counted) and copy a
// shared partial last block only when two children of one parent both append to it
// (copy-on-write), so the prompt's blocks are held once for all beams.
//
// Scoring follows Hugging Face transformers / vLLM: a hypothesis' score is its cumulative
// log-probability (raw model log-softmax, no sampling transforms) divided by
// generated_length^length_penalty; the end token is not counted in the length. Each step
// takes the top 2 x beam_width (beam, token) candidates; an end token among the top
// beam_width candidates finishes a hypothesis; the search stops when beam_width hypotheses
// are finished and no live beam can beat the worst of them (early_stopping=False), or at
// max_tokens (live beams then finish with reason "length").
//
// Beam search runs beside the serving scheduler, as vLLM v1 does: it is a search over whole
// hypotheses, not a per-token sampling step, and owns its own KV blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "constraint/compiled_grammar.h"
#include "core/thread_pool.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace ferry {

struct BeamSearchOptions {
  int32_t beam_width = 4;
  int32_t max_tokens = 32;          // new tokens per hypothesis
  float length_penalty = 1.0f;      // score = cum_logprob / length^length_penalty
  std::vector<int32_t> end_tokens;  // tokens that finish a hypothesis (eos, eot, ...)
  int32_t block_size = 16;          // KV tokens per block
  KvCacheTypes kv_types;            // K/V storage types
  // Structured output: every hypothesis follows the grammar (each beam its own matcher);
  // log-probabilities are renormalized over the tokens the grammar allows.
  std::shared_ptr<const constraint::CompiledGrammar> constraint;
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated tokens (the end token included when it finished one)
  double cum_logprob = 0;       // sum of the tokens' log-probabilities
  double score = 0;             // cum_logprob / length^length_penalty
  std::string finish_reason;    // "stop" (end token) or "length"
};

struct BeamSearchStats {
  int32_t steps = 0;                // decode forward passes
  int32_t peak_blocks = 0;          // most KV blocks held at once
  int32_t unshared_blocks = 0;      // blocks beam_width private copies of the longest beam would hold
  int32_t block_copies = 0;         // copy-on-write copies made
  int32_t blocks_in_use_after = 0;  // blocks still held when the search returned (always 0)
};

// Returns the beam_width best hypotheses, best first.
StatusOr<std::vector<BeamHypothesis>> BeamSearch(const Model& model, ThreadPool* pool,
                                                 const std::vector<int32_t>& prompt,
                                                 const BeamSearchOptions& options,
                                                 BeamSearchStats* stats = nullptr);

}  // namespace ferry
