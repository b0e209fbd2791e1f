// NgramProposer (prompt lookup decoding): drafts the tokens that followed the most recent
// earlier occurrence of the sequence's last n tokens (n from max_n down to 1) in the prompt
// and the generated text. No model, no state; strong on input-grounded tasks (editing,
// summarising, code) where the output copies spans of the input.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "speculative/proposer.h"

namespace ferry::spec {

// The k tokens after the most recent earlier match of the last n tokens of `tokens`, trying
// n = max_n .. 1 (continuing periodically past the end); empty if nothing matches.
std::vector<int32_t> NgramLookup(std::span<const int32_t> tokens, int32_t max_n, int32_t k);

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(int32_t max_n) : max_n_(max_n) {}
  const char* name() const override { return "ngram"; }
  Status Propose(std::span<const ProposeRequest> requests) override;

 private:
  int32_t max_n_;
};

}  // namespace ferry::spec
