// What a request asks its output to match, and the cache that turns that into a grammar
// bound to the model's vocabulary. Equal specs share one CompiledGrammar (and its per-context
// token sets) across requests: an LRU keyed by a hash of the spec.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "constraint/compiled_grammar.h"
#include "constraint/json_schema.h"

namespace ferry::constraint {

struct ConstraintSpec {
  enum class Kind { kJsonSchema, kJsonObject, kJsonValue, kGbnf, kRegex, kChoice };
  Kind kind = Kind::kJsonValue;
  std::string text;                  // schema JSON text, GBNF source or regex
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these
  // kGbnf: the GBNF text may reference rules `schema-0`, `schema-1`, ... without defining
  // them: each is the JSON Schema (text) at that index (tool calls: a fixed wire format around
  // each tool's parameters schema).
  std::vector<std::string> schemas;
  JsonGrammarOptions json;
  // Identity for the cache: kind, text, choices and options.
  std::string CacheKey() const;
};

StatusOr<Grammar> BuildGrammar(const ConstraintSpec& spec);
// Builds and lowers; the error says which constraint failed and why.
StatusOr<Program> CompileSpec(const ConstraintSpec& spec);

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 64);
  StatusOr<std::shared_ptr<const CompiledGrammar>> Get(const ConstraintSpec& spec);
  const std::shared_ptr<const TokenVocabulary>& vocab() const { return vocab_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace ferry::constraint
