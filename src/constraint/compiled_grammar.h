// CompiledGrammar: a Program bound to a vocabulary, with the per-context token sets the mask
// computation shares across requests. Most tokens' validity depends only on the top of the
// stack (XGrammar's and LLGuidance's observation): for a "context key" - the stack's top
// frames up to the first named rule - a walk of the vocabulary trie from that partial stack
// sorts every token into accepted (consumed without leaving the key), rejected, or uncertain
// (it leaves the key part-way: the rest of its bytes, a suffix, is checked at run time
// against the real stack below). Keys are computed on first use and kept.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "constraint/grammar.h"
#include "constraint/stack_machine.h"
#include "constraint/token_trie.h"

namespace ferry::constraint {

struct ContextTokens {
  std::vector<uint64_t> accepted;  // [ceil(n_vocab / 64)] bits
  TokenTrie uncertain;             // suffixes to check against the stack below; ids = tokens
};

class CompiledGrammar {
 public:
  // Binds the program's token terminals to the vocabulary: an error names a token text that
  // is no single token of it, or an id outside it.
  static StatusOr<std::shared_ptr<const CompiledGrammar>> Create(
      Program program, std::shared_ptr<const TokenVocabulary> vocab);
  // For a program whose token terminals are bound (or that has none); checked.
  CompiledGrammar(Program program, std::shared_ptr<const TokenVocabulary> vocab);
  const Program& program() const { return program_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  // The token sets of a context key (positions from the top of the stack down); computed
  // on first use, thread-safe. The reference stays valid for the grammar's lifetime.
  const ContextTokens& Context(const std::vector<int32_t>& key) const;
  // Token terminal t's tokens: [ceil(n_vocab / 64)] bits.
  const std::vector<uint64_t>& TokenTerminalMask(int32_t t) const {
    return token_masks_[static_cast<size_t>(t)];
  }
  bool TokenTerminalMatches(int32_t t, int32_t token) const {
    return (token_masks_[static_cast<size_t>(t)][static_cast<size_t>(token) >> 6] >> (token & 63)) & 1;
  }
  size_t num_contexts() const;
  // A context's walk kept too many parses alive (StackMachine::kMaxStacks); its tokens are
  // then incomplete and a matcher should stop.
  bool overflowed() const;

 private:
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  std::unique_ptr<ContextTokens> ComputeContext(const std::vector<int32_t>& key) const;

  Program program_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<std::vector<uint64_t>> token_masks_;  // [program_.tokens][ceil(n_vocab / 64)]
  mutable std::mutex mu_;
  mutable std::unordered_map<std::vector<int32_t>, std::unique_ptr<ContextTokens>, VecHash> contexts_;
  mutable std::unique_ptr<StackMachine> machine_;  // under mu_: keys' walks share its transitions
};

}  // namespace ferry::constraint
