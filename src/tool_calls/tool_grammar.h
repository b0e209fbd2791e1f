// The grammar that makes a model's answer a tool call valid by construction: the family's
// wire format (tool_format.h) around each tool's `parameters` JSON Schema, compiled by the
// constraint layer (a GBNF text whose schema-<i> rules are the schemas). Used for
// tool_choice "required" (any of the tools) and a named function (that one only).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constraint/constraint.h"
#include "tool_calls/tool_format.h"

namespace ferry::tool_calls {

struct ToolDef {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON Schema object; null: no parameters
};

// The answer is one call (parallel: one or more) of `tools` in `format`'s wire form.
// after_opener: the call's opener (CallOpener) has been generated already (a lazy grammar
// that starts once the model emitted it), so the grammar begins right after it.
// vocab: the model's; its special tokens in the wire format ([TOOL_CALLS], <|channel|>, ...)
// become token terminals, so the forced call emits those tokens. Null: all of it is text.
constraint::ConstraintSpec ToolCallGrammar(ToolFormat format, const std::vector<ToolDef>& tools,
                                           bool parallel, bool after_opener = false,
                                           const constraint::TokenVocabulary* vocab = nullptr);

// The GBNF text of ToolCallGrammar (schema-<i> references left to the constraint layer).
std::string ToolCallGbnf(ToolFormat format, const std::vector<ToolDef>& tools, bool parallel,
                         bool after_opener = false, const constraint::TokenVocabulary* vocab = nullptr);

}  // namespace ferry::tool_calls
