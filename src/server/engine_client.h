// EngineClient: the HTTP side's handle on the serving engine. HTTP threads submit requests and
// wait on an OutputChannel; the engine's loop thread routes each RequestOutput to the channel
// of its request. Admission is bounded: past `max_waiting` queued requests Submit answers 503.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <variant>
#include <vector>

#include "engine/beam_search.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/server_metrics.h"

namespace ferry::server {

// The outputs of one HTTP request's engine requests, in arrival order.
class OutputChannel {
 public:
  explicit OutputChannel(std::vector<RequestId> ids)
      : ids_(std::move(ids)), open_(static_cast<int32_t>(ids_.size())) {}
  // Waits up to `timeout` for outputs and moves out those available (possibly none).
  std::vector<RequestOutput> Wait(std::chrono::milliseconds timeout);
  // Every engine request of the channel finished and its outputs were taken.
  bool Done() const;
  const std::vector<RequestId>& ids() const { return ids_; }

 private:
  friend class EngineClient;
  void Push(const RequestOutput& o);

  const std::vector<RequestId> ids_;  // engine request per prompt, in prompt order
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<RequestOutput> queue_;  // guarded by mu_
  int32_t open_;                     // guarded by mu_: requests not finished yet
};

class EngineClient {
 public:
  // `model` and `tokenizer` must outlive the client; `metrics` too (finished sequences).
  static StatusOr<std::unique_ptr<EngineClient>> Create(const Model& model, const Tokenizer* tokenizer,
                                                        const EngineConfig& config, int64_t max_waiting,
                                                        ServerMetrics* metrics);
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;
  ~EngineClient();

  // Adds one engine request per prompt, all or none: 503 when the waiting queue would pass
  // max_waiting, 400 when the engine refuses a request, 500 when the engine has failed.
  // options: [prompts.size()].
  std::variant<std::shared_ptr<OutputChannel>, ApiError> Submit(
      const std::vector<std::vector<int32_t>>& prompts, const std::vector<RequestOptions>& options);
  // Beam search (use_beam_search) on the calling HTTP thread, beside the engine loop, as vLLM v1
  // runs it beside its scheduler: the model is immutable and the search owns its KV blocks (in
  // the engine's block size and K/V types), so it never takes the engine's.
  StatusOr<std::vector<BeamHypothesis>> BeamSearch(const std::vector<int32_t>& prompt,
                                                   BeamSearchOptions options) const;
  // Aborts the channel's unfinished requests (their branches finish with reason "abort").
  void Abort(const OutputChannel& channel);
  void AbortAll();
  // Channels with unfinished requests.
  int64_t NumOpen() const;
  EngineStats Stats() const { return engine_->Stats(); }
  Status EngineStatus() const { return engine_->LoopStatus(); }

 private:
  EngineClient() = default;
  void OnOutput(const RequestOutput& o);  // on the engine loop thread

  int64_t max_waiting_ = 0;
  const Model* model_ = nullptr;
  int32_t block_size_ = 16;
  KvCacheTypes kv_types_;
  bool leads_followers_ = false;  // the model is split over ranks that follow the engine's steps
  ServerMetrics* metrics_ = nullptr;
  mutable std::mutex mu_;  // held across AddRequests + registration so outputs never miss a channel
  std::unordered_map<RequestId, std::shared_ptr<OutputChannel>> channels_;  // guarded by mu_
  std::unique_ptr<Engine> engine_;  // last: its loop thread stops before the maps go
};

}  // namespace ferry::server
