// SpecState: one sequence's speculative-decoding state — its adaptive draft length, the
// tokens drafted for the current step with the distributions they were drawn from, the
// proposer's private per-sequence state (e.g. the draft model's KV lease) and counters.
// Owned by the engine's Request; destroying it returns whatever the proposer held.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ferry::spec {

// A proposer's per-sequence state (opaque to the engine).
class ProposerState {
 public:
  virtual ~ProposerState() = default;
};

struct SpecState {
  int32_t max_k = 0;               // draft tokens per step requested (0: this sequence does not speculate)
  int32_t k = 0;                   // draft length now, in [1, max_k] (adapted to the acceptance)
  bool adaptive = true;            // adapt k to the acceptance
  int32_t pause = 0;               // steps left without drafting (adaptive back-off)
  int32_t misses = 0;              // consecutive verifications at k = 1 that accepted nothing
  std::vector<int32_t> draft;      // [<= k] drafted for this step
  std::vector<float> draft_probs;  // [draft.size(), n_vocab] q rows; empty: deterministic draft
  std::unique_ptr<ProposerState> proposer;
  int64_t num_drafted = 0;        // drafts verified
  int64_t num_accepted = 0;       // ... of which were accepted
  int64_t num_verifications = 0;  // verification passes with at least one draft

  void Enable(int32_t max_tokens, bool adapt) {
    max_k = std::max(0, max_tokens);
    k = max_k;
    adaptive = adapt;
  }
  void ClearDraft() {
    draft.clear();
    draft_probs.clear();
  }
  // Records one verification of `drafted` tokens and, when adaptive, moves k towards what
  // pays: one longer after everything was accepted, halved after nothing was, and a growing
  // pause in drafting while even single drafts are rejected.
  void OnVerified(int32_t drafted, int32_t accepted) {
    num_drafted += drafted;
    num_accepted += accepted;
    ++num_verifications;
    if (!adaptive || drafted == 0) return;
    if (accepted > 0) misses = 0;
    if (accepted == drafted) {
      k = std::min(max_k, k + 1);
    } else if (accepted == 0 && k > 1) {
      k = std::max(1, k / 2);
    } else if (accepted == 0) {
      // Nothing accepted even at k = 1: stop drafting for 2, 4, ... 64 steps, then probe again.
      ++misses;
      pause = 1 << std::min(misses, 6);
    }
  }
  // Whether to draft this step (consumes one step of a pause).
  bool ShouldDraft() {
    if (max_k <= 0) return false;
    if (pause > 0) {
      --pause;
      return false;
    }
    return true;
  }
};

}  // namespace ferry::spec
