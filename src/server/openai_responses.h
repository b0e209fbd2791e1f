// OpenAI's POST /v1/responses (text in, text out) as a thin translation of chat completions,
// as llama-server offers it: `input` (a string or message items) and `instructions` become
// chat messages, the answer (whole or streamed) becomes a response object and its events.
// Nothing is stored: `previous_response_id` and `store: true` are refused.
#pragma once

#include <string_view>

#include "server/completion_service.h"

namespace ferry::server {

Reply OpenAiResponses(CompletionService& chat, std::string_view body);

}  // namespace ferry::server
