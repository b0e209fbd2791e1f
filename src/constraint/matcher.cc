#include "constraint/matcher.h"

#include "base/check.h"

namespace ferry::constraint {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), machine_(&grammar_->program()) {
  states_.push_back(machine_.Start());
  terminated_.push_back(false);
}

int32_t Matcher::AdvanceBytes(int32_t state, std::string_view bytes) {
  for (char c : bytes) {
    state = machine_.Advance(state, static_cast<uint8_t>(c));
    if (state == StackMachine::kDead) break;
  }
  return state;
}

int32_t Matcher::AdvanceTokenTerminals(int32_t state, int32_t token) {
  const size_t n = grammar_->program().tokens.size();
  if (n == 0) return StackMachine::kDead;
  matches_.resize(n);
  bool any = false;
  for (size_t t = 0; t < n; ++t) {
    matches_[t] = grammar_->TokenTerminalMatches(static_cast<int32_t>(t), token);
    any = any || matches_[t];
  }
  return any ? machine_.AdvanceToken(state, matches_) : StackMachine::kDead;
}

bool Matcher::AcceptToken(int32_t token) {
  const TokenVocabulary& v = grammar_->vocab();
  if (terminated() || token < 0 || token >= v.size()) return false;
  const int32_t cur = states_.back();
  // A token terminal that names the token takes it (an end token too, where one asks for it).
  int32_t s = AdvanceTokenTerminals(cur, token);
  if (v.IsEnd(token)) {
    if (s == StackMachine::kDead) {
      if (!CanEnd()) return false;
      states_.push_back(cur);
      terminated_.push_back(true);
      return true;
    }
  } else {
    const std::string& b = v.bytes(token);
    if (!b.empty()) s = machine_.Union(s, AdvanceBytes(cur, b));
  }
  if (s == StackMachine::kDead) return false;
  states_.push_back(s);
  terminated_.push_back(false);
  return true;
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  if (terminated()) return false;
  int32_t s = AdvanceBytes(states_.back(), bytes);
  if (s == StackMachine::kDead) return false;
  states_.push_back(s);
  terminated_.push_back(false);
  return true;
}

void Matcher::Rollback(int32_t n) {
  FERRY_CHECK(n >= 0 && n <= num_tokens());
  states_.resize(states_.size() - static_cast<size_t>(n));
  terminated_.resize(states_.size());
}

bool Matcher::CanEnd() const {
  return !terminated() && machine_.Accepts(states_.back());
}

void Matcher::AddStack(int32_t stack, std::span<uint64_t> mask) {
  const Program& p = grammar_->program();
  // The context key: positions from the top down to (and including) the first named rule's.
  key_.clear();
  int32_t below = stack;
  while (below != StackMachine::kAccept) {
    const StackMachine::Node& n = machine_.node(below);
    key_.push_back(n.pos);
    below = n.parent;
    if (!p.rules[static_cast<size_t>(p.positions[static_cast<size_t>(n.pos)].owner)].helper) break;
  }
  const ContextTokens& ctx = grammar_->Context(key_);
  for (size_t w = 0; w < mask.size(); ++w) mask[w] |= ctx.accepted[w];
  if (ctx.uncertain.empty()) return;
  // Suffixes that left the key continue on the real stack below it.
  std::vector<int32_t> state_at(static_cast<size_t>(ctx.uncertain.max_depth()) + 1);
  state_at[0] = machine_.MakeState(std::span<const int32_t>(&below, 1));
  if (state_at[0] == StackMachine::kDead) return;
  const auto& nodes = ctx.uncertain.nodes();
  const auto& ids = ctx.uncertain.ids();
  int32_t n = static_cast<int32_t>(nodes.size());
  for (int32_t i = 0; i < n;) {
    const TokenTrie::Node& tn = nodes[static_cast<size_t>(i)];
    int32_t s = machine_.Advance(state_at[static_cast<size_t>(tn.depth - 1)], tn.byte);
    if (s == StackMachine::kDead) {
      i = tn.end;
      continue;
    }
    state_at[static_cast<size_t>(tn.depth)] = s;
    for (int32_t k = ctx.uncertain.IdsBegin(i); k < ctx.uncertain.IdsBegin(i + 1); ++k) {
      int32_t tok = ids[static_cast<size_t>(k)];
      mask[static_cast<size_t>(tok) >> 6] |= uint64_t{1} << (tok & 63);
    }
    ++i;
  }
}

void Matcher::FillMask(std::span<uint64_t> mask) {
  FERRY_CHECK(mask.size() == mask_words());
  std::fill(mask.begin(), mask.end(), 0);
  if (terminated()) return;
  int32_t state = states_.back();
  if (state == StackMachine::kDead) return;
  const std::vector<int32_t> stacks = machine_.Stacks(state);  // copy: AddStack adds states
  for (int32_t stack : stacks) {
    if (stack == StackMachine::kAccept) {
      for (int32_t t : grammar_->vocab().end_tokens())
        mask[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
      continue;
    }
    const int32_t terminal =
        grammar_->program().positions[static_cast<size_t>(machine_.node(stack).pos)].token;
    if (terminal >= 0) {
      const std::vector<uint64_t>& tokens = grammar_->TokenTerminalMask(terminal);
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= tokens[w];
      continue;
    }
    AddStack(stack, mask);
  }
}

}  // namespace ferry::constraint
