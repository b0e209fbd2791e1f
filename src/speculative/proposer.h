// Proposer: drafts the next few tokens of sequences cheaply, for the target model to verify
// in one batched pass. Implementations: NgramProposer (prompt lookup) and DraftModelProposer
// (a smaller model, or the target's own weights quantized to 4 bits).
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "sampling/sampler.h"
#include "speculative/spec_state.h"

namespace ferry::spec {

struct ProposeRequest {
  // The sequence so far (prompt + generated). The target has computed all but the last token.
  std::span<const int32_t> tokens;
  Sampler* sampler;   // the sequence's own: builds q like p, and draws drafts with its RNG
  SpecState* state;   // receives draft (+ draft_probs); holds the proposer's state
  int32_t max_draft;  // draft at most this many (output and context limits)
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual const char* name() const = 0;
  // Drafts up to min(state->k, max_draft) tokens for each request (possibly none), replacing
  // state->draft and state->draft_probs. Requests are independent: one's draft never depends
  // on the others in the call.
  virtual Status Propose(std::span<const ProposeRequest> requests) = 0;
  // The target has verified the sequence: `tokens` are final. Drops per-sequence state beyond
  // them (e.g. rejected drafts' KV).
  virtual void Rollback(SpecState& state, std::span<const int32_t> tokens) {}
};

}  // namespace ferry::spec
