#include "constraint/stack_machine.h"

#include <algorithm>

#include "base/check.h"

namespace ferry::constraint {

namespace {
constexpr int32_t kUnknown = -2;
// A reference position -2 stands for "the root rule": Start() pushes it so the root's
// alternatives are expanded like any reference's.
constexpr int32_t kRootRef = -2;
}  // namespace

size_t StackMachine::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

StackMachine::StackMachine(const Program* program) : program_(program) {
  nodes_.push_back({-1, -1});  // kAccept
  nodes_.push_back({-1, -1});  // kEscape
  expanded_stamp_.resize(2, 0);
}

int32_t StackMachine::Push(int32_t parent, int32_t pos) {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(pos);
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({pos, parent});
    expanded_stamp_.push_back(0);
  }
  return it->second;
}

void StackMachine::Expand(int32_t id, std::vector<int32_t>& out) {
  if (expanded_stamp_[static_cast<size_t>(id)] == stamp_) return;
  if (out.size() >= kMaxStacks || visit_budget_ == 0) {
    overflowed_ = true;
    return;
  }
  --visit_budget_;
  expanded_stamp_[static_cast<size_t>(id)] = stamp_;
  if (id == kAccept || id == kEscape) {
    out.push_back(id);
    return;
  }
  Node n = nodes_[static_cast<size_t>(id)];
  int32_t rule;
  int32_t cont;
  if (n.pos == kRootRef) {
    rule = program_->root;
    cont = n.parent;
  } else {
    const Program::Position& p = program_->positions[static_cast<size_t>(n.pos)];
    if (p.byteset >= 0 || p.token >= 0) {
      out.push_back(id);
      return;
    }
    rule = p.rule;
    cont = p.next < 0 ? n.parent : Push(n.parent, p.next);
  }
  for (int32_t alt : program_->rules[static_cast<size_t>(rule)].alts)
    Expand(alt < 0 ? cont : Push(cont, alt), out);
}

int32_t StackMachine::Intern(std::vector<int32_t>& stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  auto it = state_ids_.find(stacks);
  if (it != state_ids_.end()) return it->second;
  int32_t id = static_cast<int32_t>(states_.size());
  State s;
  s.stacks = stacks;
  s.accepts = std::binary_search(stacks.begin(), stacks.end(), kAccept);
  s.escaped = std::binary_search(stacks.begin(), stacks.end(), kEscape);
  states_.push_back(std::move(s));
  transitions_.emplace_back();
  transitions_.back().fill(kUnknown);
  state_ids_.emplace(stacks, id);
  return id;
}

int32_t StackMachine::MakeState(std::span<const int32_t> stacks) {
  if (overflowed_) return kDead;
  ++stamp_;
  visit_budget_ = 8 * kMaxStacks;
  std::vector<int32_t> out;
  for (int32_t s : stacks) Expand(s, out);
  if (overflowed_) return kDead;
  return Intern(out);
}

int32_t StackMachine::Advance(int32_t state, uint8_t byte) {
  if (state < 0) return kDead;
  int32_t& memo = transitions_[static_cast<size_t>(state)][byte];
  if (memo != kUnknown) return memo;
  if (overflowed_) return kDead;
  ++stamp_;
  visit_budget_ = 8 * kMaxStacks;
  scratch_.clear();
  // Copy: Expand may grow states_ (no: only nodes_), but keep the loop independent of it.
  const std::vector<int32_t> stacks = states_[static_cast<size_t>(state)].stacks;
  for (int32_t id : stacks) {
    if (id == kAccept || id == kEscape) continue;
    Node n = nodes_[static_cast<size_t>(id)];
    const Program::Position& p = program_->positions[static_cast<size_t>(n.pos)];
    // A token terminal takes whole tokens only, never a byte of one.
    if (p.byteset < 0 || !HasByte(program_->bytesets[static_cast<size_t>(p.byteset)], byte)) continue;
    Expand(p.next < 0 ? n.parent : Push(n.parent, p.next), scratch_);
  }
  if (overflowed_) return kDead;
  int32_t next = Intern(scratch_);
  transitions_[static_cast<size_t>(state)][byte] = next;  // memo may dangle after Intern grew the vector
  return next;
}

int32_t StackMachine::AdvanceToken(int32_t state, std::span<const uint8_t> matches) {
  if (state < 0 || overflowed_) return kDead;
  ++stamp_;
  visit_budget_ = 8 * kMaxStacks;
  std::vector<int32_t> out;
  for (int32_t id : states_[static_cast<size_t>(state)].stacks) {
    if (id == kAccept || id == kEscape) continue;
    Node n = nodes_[static_cast<size_t>(id)];
    const Program::Position& p = program_->positions[static_cast<size_t>(n.pos)];
    if (p.token < 0 || !matches[static_cast<size_t>(p.token)]) continue;
    Expand(p.next < 0 ? n.parent : Push(n.parent, p.next), out);
  }
  if (overflowed_) return kDead;
  return Intern(out);
}

int32_t StackMachine::Union(int32_t a, int32_t b) {
  if (a < 0 || a == b) return b < 0 ? a : b;
  if (b < 0) return a;
  std::vector<int32_t> both = states_[static_cast<size_t>(a)].stacks;
  const std::vector<int32_t>& more = states_[static_cast<size_t>(b)].stacks;
  both.insert(both.end(), more.begin(), more.end());
  return Intern(both);  // each stack has a terminal on top already: nothing to expand
}

}  // namespace ferry::constraint
