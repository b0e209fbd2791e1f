#include "constraint/compiled_grammar.h"

#include "base/check.h"

namespace ferry::constraint {

size_t CompiledGrammar::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Create(
    Program program, std::shared_ptr<const TokenVocabulary> vocab) {
  for (TokenTerminal& t : program.tokens) {
    const char* neg = t.negated ? "!" : "";
    if (t.id < 0) {
      t.id = vocab->FindToken(t.text);
      if (t.id < 0)
        return InvalidArgumentError(
            "grammar token {}{} is not a token of this model's vocabulary (write <[id]> for a token by id, "
            "or a string literal for text)",
            neg, t.text);
    } else if (t.id >= vocab->size()) {
      return InvalidArgumentError("grammar token {}<[{}]> is outside this model's vocabulary of {} tokens",
                                  neg, t.id, vocab->size());
    }
  }
  return std::make_shared<const CompiledGrammar>(std::move(program), std::move(vocab));
}

CompiledGrammar::CompiledGrammar(Program program, std::shared_ptr<const TokenVocabulary> vocab)
    : program_(std::move(program)),
      vocab_(std::move(vocab)),
      machine_(std::make_unique<StackMachine>(&program_)) {
  const size_t words = (static_cast<size_t>(vocab_->size()) + 63) / 64;
  for (const TokenTerminal& t : program_.tokens) {
    FERRY_CHECK(t.id >= 0 && t.id < vocab_->size());  // Create() binds them
    std::vector<uint64_t> mask(words, 0);
    auto set = [&](int32_t id) { mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
    if (t.negated) {
      // Any one token but this one, as llama.cpp's !<...>: never an end token (those end the
      // output where the grammar may end) nor a token with neither bytes nor a text.
      for (int32_t id = 0; id < vocab_->size(); ++id)
        if (id != t.id && vocab_->IsProducible(id)) set(id);
    } else {
      set(t.id);
    }
    token_masks_.push_back(std::move(mask));
  }
}

const ContextTokens& CompiledGrammar::Context(const std::vector<int32_t>& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(key);
  if (it != contexts_.end()) return *it->second;
  auto entry = ComputeContext(key);
  const ContextTokens& ref = *entry;
  contexts_.emplace(key, std::move(entry));
  return ref;
}

size_t CompiledGrammar::num_contexts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return contexts_.size();
}

bool CompiledGrammar::overflowed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return machine_->overflowed();
}

std::unique_ptr<ContextTokens> CompiledGrammar::ComputeContext(const std::vector<int32_t>& key) const {
  StackMachine& m = *machine_;
  int32_t node = StackMachine::kEscape;
  for (size_t i = key.size(); i-- > 0;) node = m.Push(node, key[i]);
  int32_t start = m.MakeState(std::array<int32_t, 1>{node});

  auto out = std::make_unique<ContextTokens>();
  out->accepted.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  const TokenTrie& trie = vocab_->trie();
  const auto& nodes = trie.nodes();
  const auto& ids = trie.ids();
  std::vector<int32_t> state_at(static_cast<size_t>(trie.max_depth()) + 1, StackMachine::kDead);
  state_at[0] = start;
  std::vector<int32_t> escapes;  // depths on the current path whose state left the key
  std::vector<std::pair<std::string, int32_t>> uncertain;
  int32_t n = static_cast<int32_t>(nodes.size());
  for (int32_t i = 0; i < n;) {
    const TokenTrie::Node& tn = nodes[static_cast<size_t>(i)];
    while (!escapes.empty() && escapes.back() >= tn.depth) escapes.pop_back();
    int32_t s = m.Advance(state_at[static_cast<size_t>(tn.depth - 1)], tn.byte);
    if (s == StackMachine::kDead) {
      // The whole subtree fails inside the key; where the path left the key earlier, the
      // rest of each token is for the stack below to judge.
      if (!escapes.empty()) {
        for (int32_t k = trie.IdsBegin(i); k < trie.IdsBegin(tn.end); ++k) {
          int32_t tok = ids[static_cast<size_t>(k)];
          const std::string& b = vocab_->bytes(tok);
          for (int32_t d : escapes) uncertain.push_back({b.substr(static_cast<size_t>(d)), tok});
        }
      }
      i = tn.end;
      continue;
    }
    state_at[static_cast<size_t>(tn.depth)] = s;
    for (int32_t k = trie.IdsBegin(i); k < trie.IdsBegin(i + 1); ++k) {
      int32_t tok = ids[static_cast<size_t>(k)];
      out->accepted[static_cast<size_t>(tok) >> 6] |= uint64_t{1} << (tok & 63);
    }
    if (m.Escaped(s)) escapes.push_back(tn.depth);
    ++i;
  }
  out->uncertain = TokenTrie(std::move(uncertain));
  return out;
}

}  // namespace ferry::constraint
