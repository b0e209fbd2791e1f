#include "constraint/constraint.h"

#include "constraint/gbnf_parser.h"
#include "constraint/regex_compiler.h"

namespace ferry::constraint {

std::string ConstraintSpec::CacheKey() const {
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + std::to_string(json.max_whitespace) + ":";
  key += std::to_string(text.size()) + ":" + text;
  for (const std::string& c : choices) key += std::to_string(c.size()) + ":" + c;
  return key;
}

StatusOr<Grammar> BuildGrammar(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::kJsonSchema: {
      auto schema = nlohmann::ordered_json::parse(spec.text, nullptr, false);
      if (schema.is_discarded()) return InvalidArgumentError("JSON schema is not valid JSON");
      return JsonSchemaGrammar(schema, spec.json);
    }
    case ConstraintSpec::Kind::kJsonObject:
      return AnyJsonGrammar(true, spec.json);
    case ConstraintSpec::Kind::kJsonValue:
      return AnyJsonGrammar(false, spec.json);
    case ConstraintSpec::Kind::kGbnf:
      return ParseGbnf(spec.text);
    case ConstraintSpec::Kind::kRegex:
      return RegexGrammar(spec.text);
    case ConstraintSpec::Kind::kChoice: {
      if (spec.choices.empty()) return InvalidArgumentError("choice list is empty");
      std::vector<Expr> alts;
      for (const std::string& c : spec.choices) {
        if (c.empty()) return InvalidArgumentError("choice list has an empty choice");
        alts.push_back(Expr::Literal(c));
      }
      Grammar g;
      int32_t root = g.RuleId("root");
      g.Define(root, Expr::Alt(std::move(alts)));
      g.set_root(root);
      return g;
    }
  }
  return InternalError("unknown constraint kind");
}

StatusOr<Program> CompileSpec(const ConstraintSpec& spec) {
  FERRY_ASSIGN_OR_RETURN(Grammar g, BuildGrammar(spec));
  return Lower(g);
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(1, capacity)) {}

StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const ConstraintSpec& spec) {
  std::string key = spec.CacheKey();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: a big schema does not hold up other requests' lookups.
  FERRY_ASSIGN_OR_RETURN(Program p, CompileSpec(spec));
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(p), vocab_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // another thread won the race
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(compiled);
}

}  // namespace ferry::constraint
