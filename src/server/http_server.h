// The HTTP front (cpp-httplib): routes, API key, body limit, and a clean shutdown on
// SIGINT/SIGTERM. HTTP threads parse, submit and write; they never run the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine_core.h"
#include "engine/loaded_model.h"
#include "template/model_template.h"

namespace ferry::server {

struct ServerConfig {
  std::string host = "127.0.0.1";  // loopback unless asked
  int port = 8080;                 // 0: any free port (printed at start)
  std::string api_key;             // non-empty: /v1/* need "Authorization: Bearer <key>"
  std::string served_model_name;   // the `model` clients name
  int64_t max_waiting = 256;       // queued requests before 503
  size_t max_body_bytes = size_t{4} << 20;
  int http_threads = 64;        // concurrent connections served (each stream holds one)
  double drain_timeout_s = 30;  // on SIGINT/SIGTERM: time in-flight requests get to finish
  // CORS: origins whose browser pages may call the API ("*": any); empty: no CORS headers.
  std::vector<std::string> allowed_origins;
  std::string metrics_prefix = "ferry";  // /metrics names: "ferry:..." or "vllm:..."
  bool webui = true;                     // the chat page at GET / (--no-webui: off)
  std::string pooling;                   // /v1/embeddings: mean, last or cls ("": the model's)
  EngineConfig engine;
};

// Serves `model` until SIGINT or SIGTERM, then stops accepting, lets in-flight requests finish
// for up to drain_timeout_s, aborts the rest, and returns Ok. `chat_template` unset: ChatML.
Status Serve(LoadedModel& model, std::optional<ModelChatTemplate> chat_template, const ServerConfig& config);

}  // namespace ferry::server
