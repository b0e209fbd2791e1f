// The server's HTTP routes (cpp-httplib) over the CompletionService, and the handlers that turn
// httplib's own errors (404, 413, exceptions) into OpenAI-shaped JSON.
#pragma once

#include <httplib.h>

#include <cstddef>

#include "server/completion_service.h"
#include "server/embedding_service.h"
#include "server/engine_client.h"
#include "server/server_metrics.h"

namespace ferry::server {

struct RouteContext {
  CompletionService* service = nullptr;
  EngineClient* engine = nullptr;
  ServerMetrics* metrics = nullptr;
  size_t max_body_bytes = 0;
  bool webui = true;  // GET / serves the chat page
  EmbeddingService* embeddings = nullptr;  // POST /v1/embeddings (null: no route)
};

void AddRoutes(httplib::Server& http, const RouteContext& ctx);
void AddErrorHandlers(httplib::Server& http, const RouteContext& ctx);

}  // namespace ferry::server
