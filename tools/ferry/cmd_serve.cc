// `ferry serve`: an OpenAI-compatible HTTP server over the serving engine (see docs/server.md).
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "commands.h"
#include "engine_flags.h"
#include "parallel_flags.h"
#include "server/http_server.h"

namespace ferry::cli {

Runner AddServeCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    EngineFlags engine;
    server::ServerConfig server;
    std::string chat_template;
    SpecFlags spec;
    ParallelFlags parallel;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, metrics)");
  o->model.Add(cmd, /*with_threads=*/true, /*default_model=*/true);
  o->engine.Add(cmd);
  o->spec.Add(cmd);
  o->parallel.Add(cmd);
  o->parallel.AddMicroBatches(cmd);
  server::ServerConfig& s = o->server;
  cmd->add_option("--host", s.host, "address to bind (0.0.0.0 for every interface)")->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port, logged at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--served-model-name", s.served_model_name,
                  "model name clients use (default: the file name)");
  cmd->add_option("--chat-template", o->chat_template,
                  "a Jinja2 chat template file (default: the model's, else ChatML)");
  cmd->add_option("--max-waiting", s.max_waiting, "queued requests before answering 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "largest request body (413 above)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--http-threads", s.http_threads, "connections served at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--allowed-origins", s.allowed_origins,
                  "CORS: origins whose pages may call the API ('*': any; comma-separated or repeated)")
      ->delimiter(',');
  cmd->add_option("--metrics-prefix", s.metrics_prefix, "namespace of the /metrics names (ferry or vllm)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ferry", "vllm"}));
  cmd->add_option("--pooling", s.pooling,
                  "/v1/embeddings pooling: mean, last or cls (default: the model's pooling_type, else last)")
      ->check(CLI::IsMember({"mean", "last", "cls"}));
  cmd->add_flag(
      "--no-webui", [&s](int64_t) { s.webui = false; }, "no chat page at GET /");
  cmd->add_option("--drain-timeout", s.drain_timeout_s,
                  "seconds in-flight requests get to finish on SIGINT/SIGTERM")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  return [o]() -> int {
    // A server reports what it does (address, KV capacity, shutdown) at info level.
    if (GetLogLevel() > LogLevel::kInfo) SetLogLevel(LogLevel::kInfo);
    o->model.model = o->model.ModelOrDefault();
    auto ec = o->engine.ToConfig(o->model.threads, o->model.model);
    if (!ec.ok()) return Fail(ec.status());
    auto kv_types = o->model.kv_cache.ToTypes();
    if (!kv_types.ok()) return Fail(kv_types.status());
    ec->kv_types = *kv_types;
    if (Status st = o->model.sparsity.CheckSupportedByEngine(); !st.ok()) return Fail(st);
    // Under mpirun, rank 0 serves and the other ranks run its steps on their shards. mpirun
    // forwards SIGINT/SIGTERM to every rank: they are blocked before MPI starts its threads
    // (which inherit the mask), so rank 0's server takes them and drains, and the followers
    // leave them pending and end when rank 0 stops them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    auto par = OpenParallelRun(o->parallel);
    if (!par.ok()) return Fail(par.status());
    LoadOptions load = o->model.ToLoadOptions();
    load.parallel = par->layout();
    auto lm = LoadModel(o->model.model, load);
    if (!lm.ok()) return par->Fail(lm.status());
    par->PrintRankMemory(*lm->model, *kv_types);
    if (!par->root()) return par->Follow(*lm->model, ec->threads);
    std::optional<ModelChatTemplate> tmpl;
    if (!o->chat_template.empty()) {
      std::ifstream in(o->chat_template, std::ios::binary);
      if (!in) return par->Fail(IoError("{}: cannot open the chat template", o->chat_template));
      std::stringstream ss;
      ss << in.rdbuf();
      tmpl = ModelChatTemplate{ss.str(), std::nullopt, std::nullopt};
      if (auto found = FindModelChatTemplate(lm->source->metadata(), o->model.model); found.ok()) {
        tmpl->bos_token = found->bos_token;
        tmpl->eos_token = found->eos_token;
      }
    } else if (auto found = FindModelChatTemplate(lm->source->metadata(), o->model.model); found.ok()) {
      tmpl = std::move(*found);
    } else if (found.status().code() != StatusCode::kNotFound) {
      return par->Fail(found.status());
    }
    server::ServerConfig config = o->server;
    config.engine = *ec;
    par->LeadFollowers(config.engine);
    SpecDraft draft;  // outlives the engine Serve() runs
    if (o->spec.enabled())
      if (Status s = o->spec.Apply(*lm, o->model.ToLoadOptions(), nullptr, draft, config.engine.spec);
          !s.ok())
        return par->Fail(s);
    if (config.served_model_name.empty())
      config.served_model_name = std::filesystem::path(o->model.model).filename().string();
    Status st = server::Serve(*lm, std::move(tmpl), config);
    return st.ok() ? 0 : par->Fail(st);
  };
}

}  // namespace ferry::cli
