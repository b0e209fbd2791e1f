#include "server/engine_client.h"

#include <fmt/format.h>

#include <unordered_set>

namespace ferry::server {

std::vector<RequestOutput> OutputChannel::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  ready_.wait_for(l, timeout, [&] { return !queue_.empty() || open_ == 0; });
  std::vector<RequestOutput> out(std::make_move_iterator(queue_.begin()),
                                 std::make_move_iterator(queue_.end()));
  queue_.clear();
  return out;
}

bool OutputChannel::Done() const {
  std::lock_guard<std::mutex> l(mu_);
  return open_ == 0 && queue_.empty();
}

void OutputChannel::Push(const RequestOutput& o) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(o);
    if (o.request_finished) --open_;
  }
  ready_.notify_all();
}

StatusOr<std::unique_ptr<EngineClient>> EngineClient::Create(const Model& model, const Tokenizer* tokenizer,
                                                             const EngineConfig& config, int64_t max_waiting,
                                                             ServerMetrics* metrics) {
  std::unique_ptr<EngineClient> c(new EngineClient());
  c->max_waiting_ = max_waiting;
  c->metrics_ = metrics;
  c->model_ = &model;
  c->block_size_ = config.block_size;
  c->kv_types_ = config.kv_types;
  c->leads_followers_ = config.followers != nullptr && config.followers->size() > 1;
  EngineClient* self = c.get();
  FERRY_ASSIGN_OR_RETURN(c->engine_, Engine::Create(model, tokenizer, config,
                                                    [self](const RequestOutput& o) { self->OnOutput(o); }));
  return c;
}

StatusOr<std::vector<BeamHypothesis>> EngineClient::BeamSearch(const std::vector<int32_t>& prompt,
                                                               BeamSearchOptions options) const {
  // Beam search runs the model outside the engine's steps, which the other ranks never see.
  if (leads_followers_)
    return UnsupportedError("not supported when the model is split over ranks (--tensor-parallel)");
  options.block_size = block_size_;
  options.kv_types = kv_types_;
  return ferry::BeamSearch(*model_, /*pool=*/nullptr, prompt, options);
}

EngineClient::~EngineClient() {
  engine_.reset();
}  // stop the loop before channels_ goes

std::variant<std::shared_ptr<OutputChannel>, ApiError> EngineClient::Submit(
    const std::vector<std::vector<int32_t>>& prompts, const std::vector<RequestOptions>& options) {
  std::lock_guard<std::mutex> l(mu_);
  if (Status st = engine_->LoopStatus(); !st.ok())
    return ApiError{500, "the engine has failed: " + st.ToString()};
  const int64_t waiting = engine_->NumWaiting();
  if (waiting + static_cast<int64_t>(prompts.size()) > max_waiting_)
    return ApiError{503,
                    fmt::format("The server is overloaded: {} requests are waiting (limit {}). Retry later.",
                                waiting, max_waiting_)};
  StatusOr<std::vector<RequestId>> ids = engine_->AddRequests(prompts, options);  // all or none
  if (!ids.ok()) return BadRequest(ids.status().message());
  auto channel = std::make_shared<OutputChannel>(*ids);
  for (RequestId id : *ids) channels_[id] = channel;
  return channel;
}

void EngineClient::Abort(const OutputChannel& channel) {
  for (RequestId id : channel.ids()) engine_->Abort(id);  // no-op for finished requests
}

void EngineClient::AbortAll() {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, ch] : channels_) engine_->Abort(id);
}

int64_t EngineClient::NumOpen() const {
  std::lock_guard<std::mutex> l(mu_);
  std::unordered_set<const OutputChannel*> open;
  for (const auto& [id, ch] : channels_) open.insert(ch.get());
  return static_cast<int64_t>(open.size());
}

void EngineClient::OnOutput(const RequestOutput& o) {
  std::shared_ptr<OutputChannel> channel;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = channels_.find(o.id);
    if (it == channels_.end()) return;  // a request aborted during a failed Submit
    channel = it->second;
    if (o.request_finished) channels_.erase(it);
  }
  if (o.finished && metrics_) metrics_->ObserveFinished(o.metrics, o.finish_reason);
  channel->Push(o);
}

}  // namespace ferry::server
