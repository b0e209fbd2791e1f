#include "server/http_server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

#include "base/log.h"
#include "server/completion_service.h"

namespace ferry::server {
namespace {

void Send(Reply r, httplib::Response& res) {
  if (r.stream) {
    std::shared_ptr<Generation> gen = std::move(r.stream);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [gen](size_t, httplib::DataSink& sink) {
          // The whole stream in one call: it returns when done or when the client is gone.
          const bool ok = gen->Stream([&](std::string_view s) { return sink.write(s.data(), s.size()); },
                                      [&] { return sink.is_writable(); });
          if (ok) sink.done();
          return ok;
        },
        [gen](bool) { gen->Cancel(); });
    return;
  }
  res.status = r.status;
  if (r.retry_after_s > 0) res.set_header("Retry-After", std::to_string(r.retry_after_s));
  res.set_content(std::move(r.body), "application/json");
}

void SendError(const ApiError& e, httplib::Response& res) {
  Send(Reply::Error(e), res);
}

// A POST route whose body is read through a size check, so that oversized bodies, also
// chunked ones (which httplib's payload limit does not cover), are refused part-way with 413.
void PostRoute(httplib::Server& http, const char* path, size_t max_body,
               std::function<Reply(std::string_view)> fn) {
  http.Post(path, [max_body, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res,
                                                 const httplib::ContentReader& reader) {
    std::string body;
    const std::string length = req.get_header_value("Content-Length");
    const bool declared_too_big = !length.empty() && std::strtoull(length.c_str(), nullptr, 10) > max_body;
    // Past the limit nothing is kept; up to another max_body bytes are read and dropped so that a
    // client still writing its body receives the 413 (closing a socket with unread input makes
    // the kernel reset the connection, and the client would see a broken pipe, not the error).
    // Anything longer is cut off there: the body is never read whole.
    bool too_big = declared_too_big;
    size_t seen = 0;
    const bool read = reader([&](const char* data, size_t len) {
      seen += len;
      too_big = too_big || seen > max_body;
      if (!too_big) body.append(data, len);
      return seen <= 2 * max_body;
    });
    if (too_big) {
      res.set_header("Connection", "close");
      return SendError({413, "The request body is larger than the server's limit of " +
                                 std::to_string(max_body) + " bytes (--max-body-bytes)."},
                       res);
    }
    if (!read) return SendError({400, "The request body could not be read."}, res);
    Send(fn(body), res);
  });
}

// Debian's compiled cpp-httplib listens with a backlog of 5: a burst of clients overflows the
// accept queue, and connections the kernel set up with SYN cookies and then dropped are reset
// mid-request. Listening again on the bound socket raises the backlog (Linux allows it).
class HttpServer : public httplib::Server {
 public:
  bool RaiseListenBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

}  // namespace

Status Serve(LoadedModel& lm, std::optional<ModelChatTemplate> chat_template, const ServerConfig& config) {
  // SIGINT/SIGTERM are blocked in every thread (the mask is inherited, so before any starts) and
  // taken by one waiter thread; writing to a closed connection must not kill the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const Tokenizer* tok = lm.tokenizer ? &*lm.tokenizer : nullptr;
  const std::string name = config.served_model_name;
  ServerMetrics metrics(name);
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ChatPrompt> chat, ChatPrompt::Create(std::move(chat_template)));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EngineClient> engine,
                         EngineClient::Create(*lm.model, tok, config.engine, config.max_waiting, &metrics));
  const int32_t max_model_len =
      config.engine.scheduler.max_seq_len > 0 ? config.engine.scheduler.max_seq_len : lm.config().n_ctx_train;
  {
    const EngineStats s = engine->Stats();
    const int64_t kv_tokens = int64_t{s.kv_blocks} * config.engine.block_size;
    Log(LogLevel::kInfo, "KV cache: {} tokens ({} blocks of {}; K {}, V {})", kv_tokens, s.kv_blocks,
        config.engine.block_size, DTypeName(config.engine.kv_types.k), DTypeName(config.engine.kv_types.v));
    Log(LogLevel::kInfo, "maximum concurrency for {} tokens per request: {:.2f}x", max_model_len,
        static_cast<double>(kv_tokens) / max_model_len);
    if (!chat->has_model_template()) Log(LogLevel::kInfo, "no chat template in the model: chat uses ChatML");
  }

  ServingContext ctx;
  ctx.model_name = name;
  ctx.max_model_len = max_model_len;
  ctx.tokenizer = tok;
  ctx.engine = engine.get();
  ctx.chat = chat.get();
  ctx.limits.max_n = config.engine.scheduler.max_num_seqs;
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  CompletionService service(ctx);

  HttpServer http;
  const size_t threads = static_cast<size_t>(std::max(1, config.http_threads));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(config.max_body_bytes);
  http.set_keep_alive_timeout(2);  // idle keep-alive connections delay shutdown by this much at most
  http.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (config.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + config.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    SendError(
        {401, "Incorrect API key provided: send 'Authorization: Bearer <key>' (the server's --api-key)."},
        res);
    return httplib::Server::HandlerResponse::Handled;
  });
  const size_t max_body = config.max_body_bytes;
  PostRoute(http, "/v1/completions", max_body,
            [&](std::string_view body) { return service.Completions(body); });
  PostRoute(http, "/v1/chat/completions", max_body,
            [&](std::string_view body) { return service.ChatCompletions(body); });
  PostRoute(http, "/tokenize", max_body, [&](std::string_view body) { return service.Tokenize(body); });
  PostRoute(http, "/detokenize", max_body, [&](std::string_view body) { return service.Detokenize(body); });
  http.Get("/v1/models",
           [&](const httplib::Request&, httplib::Response& res) { Send(service.Models(), res); });
  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    if (Status st = engine->EngineStatus(); !st.ok())
      return SendError({503, "the engine has failed: " + st.ToString()}, res);
    res.status = 200;
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(engine->Stats()), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([&](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // our own error JSON
        ApiError e{res.status, "", ""};
        if (res.status == 404)
          e.message = "Not found: " + req.method + " " + req.path;
        else if (res.status == 413)
          e.message = "The request body is larger than the server's limit of " +
                      std::to_string(config.max_body_bytes) + " bytes (--max-body-bytes).";
        else
          e.message = "HTTP error " + std::to_string(res.status);
        SendError(e, res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([&](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    SendError({500, "internal error: " + what}, res);
  });
  http.set_logger(
      [&](const httplib::Request&, const httplib::Response& res) { metrics.ObserveHttp(res.status); });

  int port = config.port;
  if (port == 0) {
    port = http.bind_to_any_port(config.host);
    if (port < 0) return IoError("cannot bind {} on any port", config.host);
  } else if (!http.bind_to_port(config.host, port)) {
    return IoError("cannot bind {}:{} (in use, or not an address of this machine)", config.host, port);
  }
  if (!http.RaiseListenBacklog())
    Log(LogLevel::kWarn, "cannot raise the listen backlog: bursts of connections may be refused");
  Log(LogLevel::kInfo, "serving {} on http://{}:{} (OpenAI API under /v1)", name, config.host, port);

  std::atomic<bool> signalled{false}, listen_ended{false};
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (listen_ended) return;  // woken by Serve itself: listening failed
    signalled = true;
    Log(LogLevel::kInfo, "{}: no new connections; {} requests in flight (up to {} s to finish)",
        sig == SIGINT ? "SIGINT" : "SIGTERM", engine->NumOpen(), config.drain_timeout_s);
    http.stop();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(config.drain_timeout_s);
    while (engine->NumOpen() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (int64_t open = engine->NumOpen(); open > 0) {
      Log(LogLevel::kInfo, "aborting {} unfinished requests", open);
      engine->AbortAll();
    }
  });
  const bool listened = http.listen_after_bind();
  listen_ended = true;
  if (!signalled) pthread_kill(signal_waiter.native_handle(), SIGTERM);  // wake the waiter
  signal_waiter.join();
  if (!signalled && !listened)
    return IoError("the HTTP server stopped listening on {}:{}", config.host, port);
  Log(LogLevel::kInfo, "stopped");
  return Status::Ok();
}

}  // namespace ferry::server
