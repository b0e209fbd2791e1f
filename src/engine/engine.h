// Engine: the thread-safe serving API. One loop thread owns the EngineCore (all engine
// state) and steps it while there is work; add_request/abort only enqueue commands, and
// outputs are delivered incrementally to a callback on the loop thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_core.h"

namespace ferry {

using OutputCallback = std::function<void(const RequestOutput&)>;

class Engine {
 public:
  // `on_output` runs on the loop thread, once per branch per step with new tokens, and once
  // with finished = true per branch; it must not call back into the engine's Wait*.
  static StatusOr<std::unique_ptr<Engine>> Create(const Model& model, const Tokenizer* tokenizer,
                                                  const EngineConfig& config, OutputCallback on_output);
  ~Engine();  // stops the loop; unfinished requests are dropped and their blocks returned
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Errors (never queued) when the request can never run.
  StatusOr<RequestId> AddRequest(std::vector<int32_t> prompt, const RequestOptions& options);
  // Tokenizes `prompt` (with BOS, special tokens parsed); needs a tokenizer.
  StatusOr<RequestId> AddRequest(const std::string& prompt, const RequestOptions& options);
  // Thread-safe. Adds all of them or none (the first invalid one's error, naming its index),
  // in one hand-over to the loop: its next step sees every one, as an offline batch expects
  // (one AddRequest at a time races the loop, which may start a step with only the first few).
  StatusOr<std::vector<RequestId>> AddRequests(std::vector<std::vector<int32_t>> prompts,
                                               const std::vector<RequestOptions>& options);
  // Thread-safe; finishes the request's branches with reason "abort" (no-op if unknown/done).
  void Abort(RequestId id);
  // Blocks until every added request has finished.
  void WaitIdle();
  // Counters after the latest step (thread-safe).
  EngineStats Stats() const;
  // Requests added but not running yet: queued for the loop plus waiting after the latest
  // step (thread-safe; for admission control).
  int64_t NumWaiting() const;
  Status LoopStatus() const;  // an internal error that stopped the loop, if any

 private:
  Engine() = default;
  void Loop();
  // Records the step's failure (AddRequest and WaitIdle report it) and calls on_loop_failure.
  void FailLoop(const Status& status);

  struct Command {
    bool abort = false;
    RequestId id = 0;
    std::vector<int32_t> prompt;
    RequestOptions options;
    double arrival = 0;
  };

  std::unique_ptr<EngineCore> core_;
  const Tokenizer* tok_ = nullptr;
  OutputCallback on_output_;
  std::function<void(const Status&)> on_loop_failure_;  // EngineConfig::on_loop_failure
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::vector<Command> inbox_;  // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  bool has_work_ = false;       // guarded by mu_ (written by the loop)
  int64_t unfinished_ = 0;      // guarded by mu_: added requests not finished yet
  RequestId next_id_ = 1;       // guarded by mu_
  EngineStats stats_;           // guarded by mu_
  int64_t queued_adds_ = 0;     // guarded by mu_: added requests not in stats_ yet
  Status loop_status_;          // guarded by mu_
  std::thread loop_;
};

}  // namespace ferry
