// StackMachine: runs a Program as a pushdown automaton over bytes. A stack is a hash-consed
// chain of nodes (position to run next, parent), so equal stacks are equal ids; a state is the
// interned set of stacks alive after some input, each with a terminal on top (references are
// expanded eagerly, which Lower's left-recursion check makes terminate). Transitions are
// memoized per (state, byte), so a walk that revisits states costs one table lookup a byte.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "constraint/grammar.h"

namespace ferry::constraint {

class StackMachine {
 public:
  static constexpr int32_t kAccept = 0;  // node: the empty stack (the grammar may end here)
  static constexpr int32_t kEscape = 1;  // node: the bottom of a partial stack was reached
  static constexpr int32_t kDead = -1;   // state: no stack alive
  // An ambiguous grammar ((a|ab)* (b|ba)*, nested optional loops) can keep exponentially many
  // parses alive; past this many stacks in one state the machine gives up instead of eating
  // the memory and time: the step yields kDead and overflowed() turns true for good.
  static constexpr size_t kMaxStacks = size_t{1} << 14;

  explicit StackMachine(const Program* program);

  struct Node {
    int32_t pos;     // position to run next; -1 for kAccept/kEscape
    int32_t parent;  // -1 for kAccept/kEscape
  };
  int32_t Push(int32_t parent, int32_t pos);
  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }

  // The state of these (unexpanded) stacks; kDead if none survives expansion.
  int32_t MakeState(std::span<const int32_t> stacks);
  int32_t Start() { return MakeState(std::array<int32_t, 1>{Push(kAccept, -2)}); }
  int32_t Advance(int32_t state, uint8_t byte);
  // The state after one whole token consumed by the token terminals on top of the stacks:
  // matches[t] says whether terminal t (Program::tokens) accepts the token. kDead if none.
  int32_t AdvanceToken(int32_t state, std::span<const uint8_t> matches);
  // The state holding both states' stacks (kDead only if both are).
  int32_t Union(int32_t a, int32_t b);
  const std::vector<int32_t>& Stacks(int32_t state) const {
    return states_[static_cast<size_t>(state)].stacks;
  }
  bool Accepts(int32_t state) const { return state >= 0 && states_[static_cast<size_t>(state)].accepts; }
  bool Escaped(int32_t state) const { return state >= 0 && states_[static_cast<size_t>(state)].escaped; }
  const Program& program() const { return *program_; }
  bool overflowed() const { return overflowed_; }

 private:
  struct State {
    std::vector<int32_t> stacks;  // sorted node ids, terminal on top (or kAccept/kEscape)
    bool accepts = false;
    bool escaped = false;
  };
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  void Expand(int32_t node, std::vector<int32_t>& out);
  int32_t Intern(std::vector<int32_t>& stacks);

  const Program* program_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<uint32_t> expanded_stamp_;  // [nodes_] dedups expansion within one MakeState
  uint32_t stamp_ = 0;
  std::vector<State> states_;
  std::vector<std::array<int32_t, 256>> transitions_;  // [states_] -2 = not computed yet
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> state_ids_;
  std::vector<int32_t> scratch_;
  size_t visit_budget_ = 0;  // nodes one MakeState/Advance may still expand
  bool overflowed_ = false;
};

}  // namespace ferry::constraint
