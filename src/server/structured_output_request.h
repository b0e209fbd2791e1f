// Structured-output request fields, in one place beside the OpenAI schema: OpenAI's
// response_format (text | json_object | json_schema), vLLM's structured_outputs and
// guided_json / guided_regex / guided_choice / guided_grammar, llama.cpp's grammar and
// json_schema. At most one may be set. The result is a ConstraintSpec (compiled later, where
// the vocabulary is known). Tool fields are tool_request.h's (chat only; here an error).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "constraint/constraint.h"
#include "server/api_error.h"

namespace ferry::server {

// The request fields that constrain the output (at most one per request), read here.
inline constexpr std::string_view kStructuredOutputFields[] = {
    "response_format", "structured_outputs", "guided_json", "guided_regex",
    "guided_choice",   "guided_grammar",     "grammar",     "json_schema"};

// obj: the request body. chat: /v1/chat/completions (response_format and tools are chat fields).
std::optional<ApiError> ReadStructuredOutput(const nlohmann::ordered_json& obj, bool chat,
                                             std::optional<constraint::ConstraintSpec>& out);

}  // namespace ferry::server
