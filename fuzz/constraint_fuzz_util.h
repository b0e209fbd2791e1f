// Shared by the constraint fuzz targets: a compiled grammar is also run over bytes (the
// input's own), so the matcher is exercised on whatever the compiler accepted, and then
// token by token over a small vocabulary with control tokens (token terminals, masks).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "constraint/compiled_grammar.h"
#include "constraint/grammar.h"
#include "constraint/matcher.h"
#include "constraint/stack_machine.h"

namespace ferry::constraint {

inline std::shared_ptr<const TokenVocabulary> FuzzVocab() {
  // Single bytes of JSON and GBNF text, a few longer pieces, two control tokens and an end.
  static std::shared_ptr<const TokenVocabulary> vocab = [] {
    std::vector<std::string> bytes;
    for (char c : std::string_view("{}[]\":, abc01-.\\\n<>|")) bytes.push_back(std::string(1, c));
    for (const char* s : {"true", "null", "\"a\"", "<think>", "</think>", "", "", ""}) bytes.push_back(s);
    std::vector<std::string> specials(bytes.size());
    specials[bytes.size() - 3] = "[TC]";
    specials[bytes.size() - 2] = "<|c|>";
    return std::make_shared<const TokenVocabulary>(
        bytes, std::vector<int32_t>{static_cast<int32_t>(bytes.size() - 1)}, specials);
  }();
  return vocab;
}

inline void RunCompiled(const StatusOr<Grammar>& g, std::string_view input) {
  if (!g.ok()) return;
  auto p = Lower(*g);
  if (!p.ok()) return;
  StackMachine m(&*p);
  int32_t s = m.Start();
  for (size_t i = 0; i < input.size() && i < 256 && s != StackMachine::kDead; ++i)
    s = m.Advance(s, static_cast<uint8_t>(input[i]));
  auto compiled = CompiledGrammar::Create(*std::move(p), FuzzVocab());
  if (!compiled.ok()) return;
  Matcher matcher(*compiled);
  std::vector<uint64_t> mask(matcher.mask_words());
  const int32_t n = matcher.grammar().vocab().size();
  for (size_t i = 0; i < input.size() && i < 64 && !matcher.terminated() && !matcher.overflowed(); ++i) {
    matcher.FillMask(mask);
    const int32_t t = static_cast<uint8_t>(input[i]) % n;
    const bool allowed = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
    const bool accepted = matcher.AcceptToken(t);
    if (matcher.overflowed()) break;            // masks are no longer exact past the stack limit
    if (accepted != allowed) __builtin_trap();  // the mask and the matcher disagree
  }
}

}  // namespace ferry::constraint
