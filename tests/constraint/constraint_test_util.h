// Helpers for the constraint tests: full-string matching on a Program, the Llama 3 vocabulary.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "constraint/grammar.h"
#include "constraint/stack_machine.h"
#include "constraint/token_trie.h"
#include "engine/constraint_vocab.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace ferry::constraint::testing {

// The grammar's language contains exactly `s`.
inline bool FullMatch(const Program& p, std::string_view s) {
  StackMachine m(&p);
  int32_t state = m.Start();
  for (char c : s) state = m.Advance(state, static_cast<uint8_t>(c));
  return m.Accepts(state);
}

inline Program MustLower(StatusOr<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  auto p = Lower(*g);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : Program{};
}

// Llama 3's 128k byte-level BPE vocabulary (null without the shared assets).
inline std::shared_ptr<const TokenVocabulary> Llama3Vocab() {
  static std::shared_ptr<const TokenVocabulary> vocab = [] {
    std::shared_ptr<const TokenVocabulary> v;
    if (!ferry::testing::HaveAsset("llama3.2-bpe/encoder.json")) return v;
    auto md = LoadGpt2EncoderFiles(ferry::testing::AssetPath("llama3.2-bpe/encoder.json"),
                                   ferry::testing::AssetPath("llama3.2-bpe/vocab.bpe"));
    if (!md.ok()) return v;
    auto tok = Tokenizer::FromMetadata(*md);
    if (!tok.ok()) return v;
    return ConstraintVocabulary(*tok);
  }();
  return vocab;
}

}  // namespace ferry::constraint::testing
