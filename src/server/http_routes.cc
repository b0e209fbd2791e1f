#include "server/http_routes.h"

#include <cstdlib>
#include <functional>
#include <string>

#include "server/anthropic_messages.h"
#include "server/openai_responses.h"
#include "server/webui_page.h"

namespace ferry::server {
namespace {

void Send(Reply r, httplib::Response& res) {
  if (r.stream) {
    std::shared_ptr<Generation> gen = std::move(r.stream);
    std::shared_ptr<SseTranslator> translate = std::move(r.translate);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [gen, translate](size_t, httplib::DataSink& sink) {
          // The whole stream in one call: it returns when done or when the client is gone.
          const SseTranslator::Write write = [&](std::string_view s) {
            return sink.write(s.data(), s.size());
          };
          const bool ok = gen->Stream(
              [&](std::string_view s) { return translate ? translate->Feed(s, write) : write(s); },
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

std::string TooLargeMessage(size_t max_body) {
  return "The request body is larger than the server's limit of " + std::to_string(max_body) +
         " bytes (--max-body-bytes).";
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
      return SendError({413, TooLargeMessage(max_body)}, res);
    }
    if (!read) return SendError({400, "The request body could not be read."}, res);
    Send(fn(body), res);
  });
}

}  // namespace

void AddRoutes(httplib::Server& http, const RouteContext& ctx) {
  CompletionService& service = *ctx.service;
  const size_t max_body = ctx.max_body_bytes;
  PostRoute(http, "/v1/completions", max_body,
            [&service](std::string_view b) { return service.Completions(b); });
  PostRoute(http, "/v1/chat/completions", max_body,
            [&service](std::string_view b) { return service.ChatCompletions(b); });
  PostRoute(http, "/v1/messages", max_body,
            [&service](std::string_view b) { return AnthropicMessages(service, b); });
  PostRoute(http, "/v1/responses", max_body,
            [&service](std::string_view b) { return OpenAiResponses(service, b); });
  if (EmbeddingService* e = ctx.embeddings)
    PostRoute(http, "/v1/embeddings", max_body, [e](std::string_view b) { return e->Embeddings(b); });
  PostRoute(http, "/tokenize", max_body, [&service](std::string_view b) { return service.Tokenize(b); });
  PostRoute(http, "/detokenize", max_body, [&service](std::string_view b) { return service.Detokenize(b); });
  http.Get("/v1/models",
           [&service](const httplib::Request&, httplib::Response& res) { Send(service.Models(), res); });
  http.Get(R"(/v1/models/(.+))", [&service](const httplib::Request& req, httplib::Response& res) {
    Send(service.Model(req.matches[1].str()), res);
  });
  http.Get("/version",
           [&service](const httplib::Request&, httplib::Response& res) { Send(service.Version(), res); });
  EngineClient* engine = ctx.engine;
  http.Get("/health", [engine](const httplib::Request&, httplib::Response& res) {
    if (Status st = engine->EngineStatus(); !st.ok())
      return SendError({503, "the engine has failed: " + st.ToString()}, res);
    res.status = 200;
  });
  ServerMetrics* metrics = ctx.metrics;
  http.Get("/metrics", [engine, metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Render(engine->Stats()), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (ctx.webui)
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(kChatPageHtml), "text/html; charset=utf-8");
    });
}

void AddErrorHandlers(httplib::Server& http, const RouteContext& ctx) {
  const size_t max_body = ctx.max_body_bytes;
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([max_body](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // our own error JSON
        ApiError e{res.status, ""};
        if (res.status == 404)
          e.message = "Not found: " + req.method + " " + req.path;
        else if (res.status == 413)
          e.message = TooLargeMessage(max_body);
        else
          e.message = "HTTP error " + std::to_string(res.status);
        SendError(e, res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    SendError({500, "internal error: " + what}, res);
  });
  ServerMetrics* metrics = ctx.metrics;
  http.set_logger(
      [metrics](const httplib::Request&, const httplib::Response& res) { metrics->ObserveHttp(res.status); });
}

}  // namespace ferry::server
