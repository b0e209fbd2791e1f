// Anthropic's POST /v1/messages as a thin translation of chat completions (as llama-server
// offers it), so Claude-style clients can use a local model: the request becomes a chat
// request, the answer (whole or streamed) becomes Anthropic's message and events, and errors
// take Anthropic's shape, {"type": "error", "error": {"type", "message"}}.
#pragma once

#include <string_view>

#include "server/completion_service.h"

namespace ferry::server {

Reply AnthropicMessages(CompletionService& chat, std::string_view body);

}  // namespace ferry::server
