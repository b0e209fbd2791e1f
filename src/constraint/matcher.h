// Matcher: one sequence's position in a CompiledGrammar. Advances over whole tokens, rolls
// back (speculative decoding's rejected drafts), and yields the allowed-token mask. Copyable:
// a forked branch copies its parent's matcher and then goes its own way.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "constraint/compiled_grammar.h"
#include "constraint/stack_machine.h"

namespace ferry::constraint {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances over the token if the grammar allows it (an end token: where the grammar may
  // end, which terminates the matcher); false leaves the state unchanged.
  bool AcceptToken(int32_t token);
  // Advances over raw bytes (a test or a forced prefix); false leaves the state unchanged.
  bool AcceptBytes(std::string_view bytes);
  // Undoes the last n accepted tokens (n <= num_tokens()).
  void Rollback(int32_t n);
  int32_t num_tokens() const { return static_cast<int32_t>(states_.size()) - 1; }
  // The grammar may end here (an end token is allowed).
  bool CanEnd() const;
  // An end token was accepted: nothing more is allowed.
  bool terminated() const { return terminated_.back(); }
  // Bit t of mask [ceil(n_vocab / 64) words] is set iff token t is allowed next.
  void FillMask(std::span<uint64_t> mask);
  size_t mask_words() const { return (static_cast<size_t>(grammar_->vocab().size()) + 63) / 64; }
  const CompiledGrammar& grammar() const { return *grammar_; }
  // The grammar proved too ambiguous to follow (StackMachine::kMaxStacks parses at once):
  // masks are no longer exact, so the caller ends the output instead.
  bool overflowed() const { return machine_.overflowed() || grammar_->overflowed(); }

 private:
  int32_t AdvanceBytes(int32_t state, std::string_view bytes);
  // The state after `token` taken whole by the token terminals on top; kDead if none takes it.
  int32_t AdvanceTokenTerminals(int32_t state, int32_t token);
  void AddStack(int32_t stack, std::span<uint64_t> mask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  StackMachine machine_;          // this sequence's own stacks and transitions (points into grammar_)
  std::vector<int32_t> states_;   // [num_tokens + 1] the state after each accepted token
  std::vector<bool> terminated_;  // [num_tokens + 1]
  std::vector<int32_t> key_;      // scratch
  std::vector<uint8_t> matches_;  // scratch: [program tokens] whether each terminal takes a token
};

}  // namespace ferry::constraint
