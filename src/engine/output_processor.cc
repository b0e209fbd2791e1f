#include "engine/output_processor.h"

#include <utility>

namespace ferry {

OutputProcessor::TextState& OutputProcessor::State(const Request* r) {
  auto& s = states_[r];
  if (!s) {
    s = std::unique_ptr<TextState>(
        new TextState{IncrementalDetokenizer(*tok_, /*render_special=*/!r->options.skip_special_tokens),
                      StopMatcher(r->options.stop, r->options.include_stop_str_in_output)});
  }
  return *s;
}

std::string OutputProcessor::Spaced(const RequestOptions& o, int32_t token, std::string text,
                                    TextState& s) const {
  if (o.skip_special_tokens || !o.spaces_between_special_tokens || text.empty()) return text;
  const bool special = tok_->TokenToPiece(token).empty();  // has text only when rendered
  std::string out = (special && s.emitted) || (!special && s.after_special) ? " " + text : text;
  s.after_special = special;
  s.emitted = true;
  return out;
}

void OutputProcessor::Process(const std::vector<SeqEvent>& events, Scheduler& scheduler,
                              std::vector<RequestOutput>& outputs) {
  for (const SeqEvent& e : events) {
    if (e.token < 0) continue;  // finished without a token (end of generation)
    // Speculative steps emit several tokens of a branch at once: one output per branch and
    // step, and nothing after a stop string.
    if (tok_ && State(e.req).stops.stopped()) continue;
    const bool same = !outputs.empty() && outputs.back().id == e.req->id && outputs.back().branch == e.req->branch &&
                      !outputs.back().finished;
    if (!same) {
      outputs.emplace_back();
      outputs.back().id = e.req->id;
      outputs.back().branch = e.req->branch;
    }
    RequestOutput& o = outputs.back();
    if (!e.req->prompt_logprobs.empty()) o.prompt_logprobs = std::exchange(e.req->prompt_logprobs, {});
    o.token_ids.push_back(e.token);
    if (e.req->options.logprobs >= 0) o.logprobs.push_back(e.logprobs);
    if (tok_) {
      TextState& s = State(e.req);
      o.text += s.stops.Push(Spaced(e.req->options, e.token, s.detok.Push(e.token), s));
      if (s.stops.stopped()) scheduler.Finish(e.req, RequestStatus::kFinishedStop);
      s.output_index = outputs.size() - 1;
    }
  }
}

void OutputProcessor::Finalize(std::vector<std::unique_ptr<Request>> finished, const Scheduler& scheduler,
                               std::vector<RequestOutput>& outputs) {
  for (std::unique_ptr<Request>& r : finished) {
    RequestOutput* o = nullptr;
    std::string rest;
    auto it = states_.find(r.get());
    if (it != states_.end()) {
      TextState& s = *it->second;
      if (!s.stops.stopped()) {
        rest = s.stops.Push(s.detok.Flush());
        rest += s.stops.Flush();
      }
      if (s.output_index != SIZE_MAX) o = &outputs[s.output_index];
      states_.erase(it);
    }
    if (!o) {
      // Find this step's output of the branch when there was no text state (no tokenizer).
      for (size_t i = outputs.size(); i-- > 0;)
        if (outputs[i].id == r->id && outputs[i].branch == r->branch && !outputs[i].finished) {
          o = &outputs[i];
          break;
        }
    }
    if (!o || o->finished) {
      outputs.emplace_back();
      o = &outputs.back();
      o->id = r->id;
      o->branch = r->branch;
    }
    o->text += rest;
    o->finished = true;
    // Reported once per request: by its last finished branch (several may end in one step).
    bool later_branch = false;
    for (size_t k = static_cast<size_t>(&r - finished.data()) + 1; k < finished.size(); ++k)
      later_branch |= finished[k]->id == r->id;
    o->request_finished = !later_branch && scheduler.LiveBranches(r->id) == 0;
    o->finish_reason = FinishReason(r->status);
    o->metrics = ComputeRequestMetrics(*r);
    o->embedding = std::move(r->embedding);
    if (!r->prompt_logprobs.empty()) o->prompt_logprobs = std::exchange(r->prompt_logprobs, {});
  }
  for (auto& [req, s] : states_) s->output_index = SIZE_MAX;
}

}  // namespace ferry
