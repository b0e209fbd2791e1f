// JSON Schema (as OpenAI strict mode and vLLM accept it) into a Grammar whose language is
// the schema's valid instances, written compactly up to bounded whitespace. Supported: type
// (incl. lists), properties, required, additionalProperties, items, prefixItems, minItems,
// maxItems, enum, const, anyOf, oneOf (as anyOf), allOf of objects, $ref/$defs/definitions
// (recursion included), string minLength/maxLength/pattern/format (date, time, date-time,
// uuid, email), integer/number minimum/maximum/exclusiveMinimum/exclusiveMaximum (a bounded
// number is written without an exponent; number bounds must be integers). Annotations (title,
// description, default, examples, $schema, $id, $comment) are ignored; any other keyword is
// an error naming it and where it is. See docs/structured-outputs.md for what "valid" means
// in the few places the grammar is narrower than the schema (property order, canonical
// enum/const text).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"
#include "constraint/grammar.h"

namespace ferry::constraint {

struct JsonGrammarOptions {
  // Longest whitespace run allowed between JSON tokens: bounded, so a model cannot run away
  // in whitespace.
  int32_t max_whitespace = 8;
};

StatusOr<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema,
                                    const JsonGrammarOptions& options = {});
// Parses the schema text first (errors say so).
StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_text, const JsonGrammarOptions& options = {});
// Any JSON value, or (object_only: response_format json_object) any JSON object.
Grammar AnyJsonGrammar(bool object_only, const JsonGrammarOptions& options = {});

}  // namespace ferry::constraint
