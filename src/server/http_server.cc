#include "server/http_server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "base/log.h"
#include "engine/constraint_vocab.h"
#include "server/access_control.h"
#include "server/completion_service.h"
#include "server/http_routes.h"

namespace ferry::server {
namespace {

// Debian's compiled cpp-httplib listens with a backlog of 5: a burst of clients overflows the
// accept queue, and connections the kernel set up with SYN cookies and then dropped are reset
// mid-request. Listening again on the bound socket raises the backlog (Linux allows it).
class HttpServer : public httplib::Server {
 public:
  bool RaiseListenBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

// SIGINT/SIGTERM blocked in every thread (the mask is inherited, so before any starts) and
// taken by one waiter thread; writing to a closed connection must not kill the process.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

void LogCapacity(const EngineClient& engine, const ServerConfig& config, int32_t max_model_len) {
  const EngineStats s = engine.Stats();
  // With sliding-window groups (vLLM's count): the tokens each group's share of the blocks holds,
  // and concurrency from what a sequence of max_model_len positions holds with its windows.
  const int64_t kv_tokens = int64_t{s.kv_blocks} / std::max(1, s.kv_groups) * config.engine.block_size;
  Log(LogLevel::kInfo, "KV cache: {} tokens ({} blocks of {}{}; K {}, V {})", kv_tokens, s.kv_blocks,
      config.engine.block_size,
      s.kv_groups > 1 ? fmt::format(", {} KV groups sharing them", s.kv_groups) : std::string(),
      DTypeName(config.engine.kv_types.k), DTypeName(config.engine.kv_types.v));
  Log(LogLevel::kInfo, "maximum concurrency for {} tokens per request: {:.2f}x", max_model_len,
      s.kv_groups > 1
          ? static_cast<double>(s.kv_blocks) / static_cast<double>(std::max<int64_t>(1, s.kv_max_len_blocks))
          : static_cast<double>(kv_tokens) / max_model_len);
}

void ConfigureHttp(HttpServer& http, const ServerConfig& config, const RouteContext& routes) {
  const size_t threads = static_cast<size_t>(std::max(1, config.http_threads));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(config.max_body_bytes);
  http.set_keep_alive_timeout(2);  // idle keep-alive connections delay shutdown by this much at most
  InstallAccessControl(http, {config.api_key, config.allowed_origins});
  AddRoutes(http, routes);
  AddErrorHandlers(http, routes);
}

// The bound port (config.port, or any free one for 0).
StatusOr<int> Bind(HttpServer& http, const ServerConfig& config) {
  int port = config.port;
  if (port == 0) {
    port = http.bind_to_any_port(config.host);
    if (port < 0) return IoError("cannot bind {} on any port", config.host);
  } else if (!http.bind_to_port(config.host, port)) {
    return IoError("cannot bind {}:{} (in use, or not an address of this machine)", config.host, port);
  }
  if (!http.RaiseListenBacklog())
    Log(LogLevel::kWarn, "cannot raise the listen backlog: bursts of connections may be refused");
  return port;
}

// Serves until SIGINT/SIGTERM; then stops accepting, gives in-flight requests up to
// drain_timeout_s and aborts the rest.
Status ListenUntilSignalled(HttpServer& http, EngineClient& engine, const sigset_t& stop_signals,
                            const ServerConfig& config, int port) {
  std::atomic<bool> signalled{false}, listen_ended{false};
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (listen_ended) return;  // woken by Serve itself: listening failed
    signalled = true;
    Log(LogLevel::kInfo, "{}: no new connections; {} requests in flight (up to {} s to finish)",
        sig == SIGINT ? "SIGINT" : "SIGTERM", engine.NumOpen(), config.drain_timeout_s);
    http.stop();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(config.drain_timeout_s);
    while (engine.NumOpen() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (int64_t open = engine.NumOpen(); open > 0) {
      Log(LogLevel::kInfo, "aborting {} unfinished requests", open);
      engine.AbortAll();
    }
  });
  const bool listened = http.listen_after_bind();
  listen_ended = true;
  if (!signalled) pthread_kill(signal_waiter.native_handle(), SIGTERM);  // wake the waiter
  signal_waiter.join();
  if (!signalled && !listened)
    return IoError("the HTTP server stopped listening on {}:{}", config.host, port);
  return Status::Ok();
}

}  // namespace

Status Serve(LoadedModel& lm, std::optional<ModelChatTemplate> chat_template, const ServerConfig& config) {
  const sigset_t stop_signals = BlockStopSignals();
  const Tokenizer* tok = lm.tokenizer ? &*lm.tokenizer : nullptr;
  const std::string name = config.served_model_name;
  ServerMetrics metrics(name, config.metrics_prefix);
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ChatPrompt> chat, ChatPrompt::Create(std::move(chat_template)));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EngineClient> engine,
                         EngineClient::Create(*lm.model, tok, config.engine, config.max_waiting, &metrics));
  const int32_t max_model_len =
      config.engine.scheduler.max_seq_len > 0 ? config.engine.scheduler.max_seq_len : lm.config().n_ctx_train;
  LogCapacity(*engine, config, max_model_len);
  if (!chat->has_model_template()) Log(LogLevel::kInfo, "no chat template in the model: chat uses ChatML");

  ServingContext ctx;
  ctx.model_name = name;
  ctx.max_model_len = max_model_len;
  ctx.n_vocab = lm.config().n_vocab;
  ctx.tokenizer = tok;
  ctx.engine = engine.get();
  ctx.chat = chat.get();
  ctx.limits.max_n = config.engine.scheduler.max_num_seqs;
  std::unique_ptr<constraint::GrammarCache> grammars;  // compiled constraints, LRU by spec
  if (tok) {
    grammars = std::make_unique<constraint::GrammarCache>(ConstraintVocabulary(*tok));
    ctx.grammars = grammars.get();
  }
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  CompletionService service(ctx);
  EmbeddingContext ectx{name,           max_model_len, lm.config().n_vocab, lm.config().dim,
                        Pooling::kLast, tok,           engine.get()};
  if (config.pooling.empty()) {
    FERRY_ASSIGN_OR_RETURN(ectx.pooling, PoolingFromMetadata(lm.source->metadata(), lm.config().arch));
  } else {
    FERRY_ASSIGN_OR_RETURN(ectx.pooling, ParsePooling(config.pooling));
  }
  EmbeddingService embeddings(ectx);

  HttpServer http;
  RouteContext routes{&service, engine.get(), &metrics, config.max_body_bytes, config.webui};
  routes.embeddings = &embeddings;
  ConfigureHttp(http, config, routes);
  FERRY_ASSIGN_OR_RETURN(const int port, Bind(http, config));
  Log(LogLevel::kInfo, "serving {} on http://{}:{} (OpenAI API under /v1{})", name, config.host, port,
      config.webui ? ", chat page at /" : "");
  FERRY_RETURN_IF_ERROR(ListenUntilSignalled(http, *engine, stop_signals, config, port));
  Log(LogLevel::kInfo, "stopped");
  return Status::Ok();
}

}  // namespace ferry::server
