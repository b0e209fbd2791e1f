// Verifier: decides which drafted tokens a target model accepts. Greedy requests accept
// exactly the target's choices; sampled requests use speculative sampling (Leviathan et al.
// 2023, Chen et al. 2023), which leaves the output distribution exactly the target's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"

namespace ferry::spec {

struct Verification {
  // The accepted drafts, then one token from the target (the correction at the first
  // rejection, or the bonus token after all were accepted): num_accepted + 1 tokens.
  std::vector<int32_t> tokens;
  int32_t num_accepted = 0;
};

// Speculative sampling of k = draft.size() drafted tokens.
//   p: [k + 1, n_vocab] the target's processed distributions (Sampler::ProcessedProbs);
//      row j follows the real tokens and draft[0, j).
//   q: [k, n_vocab] the draft's processed distributions (row j is what draft[j] was drawn
//      from), or empty for a deterministic draft (n-gram lookup), which is q = one-hot.
// Draft j is accepted with probability min(1, p_j(x) / q_j(x)); at the first rejection one
// token is drawn from normalize(max(0, p_j - q_j)); if all k are accepted one bonus token is
// drawn from p_k. Random numbers come from `rng` (the request's sampler).
Verification VerifySampled(std::span<const float> p, std::span<const float> q, std::span<const int32_t> draft,
                           int32_t n_vocab, Sampler& rng);

// Greedy verification: target_choice [k + 1] are the target's greedy tokens at each row.
// Accepts drafts while they equal the target's choice, then appends the target's choice.
Verification VerifyGreedy(std::span<const int32_t> target_choice, std::span<const int32_t> draft);

}  // namespace ferry::spec
