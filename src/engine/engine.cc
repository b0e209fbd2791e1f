#include "engine/engine.h"

#include <chrono>
#include <utility>

#include "base/log.h"

namespace ferry {

StatusOr<std::unique_ptr<Engine>> Engine::Create(const Model& model, const Tokenizer* tokenizer,
                                                 const EngineConfig& config, OutputCallback on_output) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EngineCore> core, EngineCore::Create(model, tokenizer, config));
  std::unique_ptr<Engine> e(new Engine());
  e->core_ = std::move(core);
  e->tok_ = tokenizer;
  e->on_output_ = std::move(on_output);
  e->on_loop_failure_ = config.on_loop_failure;
  e->stats_ = e->core_->Stats();  // capacity is known before the first step
  e->loop_ = std::thread([p = e.get()] { p->Loop(); });
  return e;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (loop_.joinable()) loop_.join();
}

StatusOr<RequestId> Engine::AddRequest(std::vector<int32_t> prompt, const RequestOptions& options) {
  std::vector<std::vector<int32_t>> prompts;
  prompts.push_back(std::move(prompt));
  FERRY_ASSIGN_OR_RETURN(std::vector<RequestId> ids, AddRequests(std::move(prompts), {options}));
  return ids[0];
}

StatusOr<std::vector<RequestId>> Engine::AddRequests(std::vector<std::vector<int32_t>> prompts,
                                                     const std::vector<RequestOptions>& options) {
  if (prompts.size() != options.size())
    return InvalidArgumentError("AddRequests: {} prompts but {} option sets", prompts.size(), options.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Status st = core_->Validate(prompts[i], options[i]);  // immutable config: no lock needed
    if (!st.ok())
      return prompts.size() == 1 ? st : Status(st.code(), fmt::format("request {}: {}", i, st.message()));
  }
  const double arrival = core_->Now();
  std::vector<RequestId> ids;
  ids.reserve(prompts.size());
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!loop_status_.ok()) return loop_status_;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Command c;
      c.prompt = std::move(prompts[i]);
      c.options = options[i];
      c.arrival = arrival;
      ids.push_back(c.id = next_id_++);
      inbox_.push_back(std::move(c));
    }
    unfinished_ += static_cast<int64_t>(prompts.size());
    queued_adds_ += static_cast<int64_t>(prompts.size());
  }
  wake_.notify_one();
  return ids;
}

StatusOr<RequestId> Engine::AddRequest(const std::string& prompt, const RequestOptions& options) {
  if (!tok_) return InvalidArgumentError("text prompts need a tokenizer; pass token ids");
  return AddRequest(tok_->Encode(prompt, true, true), options);
}

void Engine::Abort(RequestId id) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Command c;
    c.abort = true;
    c.id = id;
    inbox_.push_back(std::move(c));
  }
  wake_.notify_one();
}

void Engine::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  idle_.wait(l, [&] { return unfinished_ == 0 || !loop_status_.ok(); });
}

int64_t Engine::NumWaiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return queued_adds_ + stats_.waiting;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

Status Engine::LoopStatus() const {
  std::lock_guard<std::mutex> l(mu_);
  return loop_status_;
}

void Engine::FailLoop(const Status& status) {
  Log(LogLevel::kError, "engine step failed: {}", status.ToString());
  {
    std::lock_guard<std::mutex> l(mu_);
    loop_status_ = status;
    has_work_ = false;
  }
  idle_.notify_all();
  if (on_loop_failure_) on_loop_failure_(status);
}

void Engine::Loop() {
  const auto heartbeat = std::chrono::duration<double>(core_->follower_heartbeat_s());
  for (;;) {
    std::vector<Command> commands;
    bool ready = true;
    {
      std::unique_lock<std::mutex> l(mu_);
      auto woken = [&] { return stop_ || !inbox_.empty() || has_work_; };
      // Follower ranks wait for rank 0 with a deadline: an idle leader wakes to reassure them.
      if (core_->leads_followers())
        ready = wake_.wait_for(l, heartbeat, woken);
      else
        wake_.wait(l, woken);
      if (stop_) return;
      commands.swap(inbox_);
    }
    if (!ready) {
      if (Status st = core_->KeepFollowersAlive(); !st.ok()) return FailLoop(st);
      continue;
    }
    int64_t added = 0;
    for (Command& c : commands) {
      added += c.abort ? 0 : 1;
      if (c.abort) {
        core_->Abort(c.id);
      } else {
        core_->Add(c.id, std::move(c.prompt), c.options, c.arrival);
      }
    }
    StatusOr<std::vector<RequestOutput>> outputs = core_->Step();
    if (outputs.ok()) {
      // Published before the outputs go out, so a client holding its response already sees
      // counters that include it (e.g. /metrics right after a completion returns).
      std::lock_guard<std::mutex> l(mu_);
      stats_ = core_->Stats();
    }
    int64_t done = 0;
    if (outputs.ok()) {
      for (const RequestOutput& o : *outputs) {
        if (on_output_) on_output_(o);
        done += o.request_finished ? 1 : 0;
      }
    }
    bool idle = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      unfinished_ -= done;
      queued_adds_ -= added;
      idle = unfinished_ == 0;
      has_work_ = core_->HasWork();
      stats_ = core_->Stats();
    }
    if (!outputs.ok()) return FailLoop(outputs.status());
    if (idle) idle_.notify_all();
  }
}

}  // namespace ferry
