#include "constraint/constraint.h"

#include <fmt/format.h>

#include "constraint/gbnf_parser.h"
#include "constraint/regex_compiler.h"

namespace ferry::constraint {

std::string ConstraintSpec::CacheKey() const {
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + std::to_string(json.max_whitespace) + ":";
  key += std::to_string(text.size()) + ":" + text;
  for (const std::string& c : choices) key += std::to_string(c.size()) + ":" + c;
  key.append("|").append(std::to_string(schemas.size()));
  for (const std::string& s : schemas) key.append(":").append(std::to_string(s.size())).append(":").append(s);
  return key;
}

namespace {

Expr RemapRules(Expr e, const std::vector<int32_t>& map) {
  if (e.kind == Expr::Kind::kRef) e.rule = map[static_cast<size_t>(e.rule)];
  for (Expr& item : e.items) item = RemapRules(std::move(item), map);
  return e;
}

// Copies sub's rules into g under fresh names; the id of sub's root there.
int32_t EmbedGrammar(Grammar& g, const Grammar& sub, const std::string& prefix) {
  std::vector<int32_t> map(sub.num_rules());
  for (size_t i = 0; i < sub.num_rules(); ++i) map[i] = g.NewRule(prefix + sub.name(static_cast<int32_t>(i)));
  for (size_t i = 0; i < sub.num_rules(); ++i)
    if (sub.IsDefined(static_cast<int32_t>(i)))
      g.Define(map[i], RemapRules(sub.body(static_cast<int32_t>(i)), map));
  return map[static_cast<size_t>(sub.root())];
}

// GBNF whose `schema-<i>` rules are spec.schemas[i].
StatusOr<Grammar> GbnfWithSchemas(const ConstraintSpec& spec) {
  FERRY_ASSIGN_OR_RETURN(Grammar g, ParseGbnf(spec.text));
  for (size_t i = 0; i < spec.schemas.size(); ++i) {
    const std::string name = "schema-" + std::to_string(i);
    const int32_t rule = g.FindRule(name);
    if (rule < 0) continue;
    if (g.IsDefined(rule)) return InvalidArgumentError("GBNF rule '{}' is reserved for a JSON schema", name);
    StatusOr<Grammar> sub = JsonSchemaGrammar(std::string_view(spec.schemas[i]), spec.json);
    if (!sub.ok())
      return Status(sub.status().code(), fmt::format("schema {}: {}", i, sub.status().message()));
    g.Define(rule, Expr::Ref(EmbedGrammar(g, *sub, name + "-")));
  }
  return g;
}

}  // namespace

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
      return spec.schemas.empty() ? ParseGbnf(spec.text) : GbnfWithSchemas(spec);
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
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> compiled,
                         CompiledGrammar::Create(std::move(p), vocab_));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // another thread won the race
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

}  // namespace ferry::constraint
