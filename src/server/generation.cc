#include "server/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace ferry::server {

using json = nlohmann::ordered_json;

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Generation::Generation(GenerationSpec spec, const Tokenizer* tokenizer, EngineClient* engine,
                       std::shared_ptr<OutputChannel> channel)
    : spec_(std::move(spec)), tok_(tokenizer), engine_(engine), channel_(std::move(channel)) {
  choices_.resize(spec_.prompt_tokens.size() * static_cast<size_t>(spec_.n));
  if (spec_.api == Api::kChat && spec_.chat_output.active())
    for (Choice& c : choices_)
      c.out = std::make_unique<ChatOutput>(spec_.chat_output, [tok = tok_](int32_t id) {
        return tok ? tok->TokenToPiece(id, /*render_special=*/true) : std::string();
      });
}

Generation::~Generation() {
  Cancel();
}

void Generation::Cancel() {
  if (!channel_->Done()) engine_->Abort(*channel_);
}

Generation::Delta Generation::Apply(RequestOutput&& o) {
  const auto& ids = channel_->ids();
  const size_t prompt = static_cast<size_t>(std::find(ids.begin(), ids.end(), o.id) - ids.begin());
  Delta d;
  d.index = prompt * static_cast<size_t>(spec_.n) + static_cast<size_t>(o.branch);
  Choice& c = choices_.at(d.index);
  c.text += o.text;
  c.tokens.insert(c.tokens.end(), o.token_ids.begin(), o.token_ids.end());
  c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
  if (!o.prompt_logprobs.empty()) {
    c.prompt_logprobs = std::move(o.prompt_logprobs);
    d.scored_prompt = true;
  }
  if (c.out) {
    d.chat = c.out->Push(o.text, o.token_ids);
    if (o.finished) {
      ChatDelta rest = c.out->Finish();
      d.chat.reasoning += rest.reasoning;
      d.chat.content += rest.content;
      for (ChatDelta::Call& call : rest.calls) d.chat.calls.push_back(std::move(call));
    }
  }
  d.text = std::move(o.text);
  d.tokens = std::move(o.token_ids);
  d.logprobs = std::move(o.logprobs);
  if (o.finished) {
    d.finished = true;
    c.finish_reason = o.finish_reason;
    // A finished answer that called tools (not one cut short by max_tokens).
    if (c.out && c.out->has_calls() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
    c.output_tokens = o.metrics.output_tokens;
    c.cached_prompt_tokens = o.metrics.cached_prompt_tokens;
  }
  return d;
}

std::string Generation::Piece(int32_t id) const {
  return tok_ ? tok_->TokenToPiece(id) : std::to_string(id);
}

namespace {
// Completions' logprobs object with b's entries after a's (the echoed prompt, then the output).
json Concat(json a, const json& b) {
  if (b.is_null()) return a;
  for (auto& [key, list] : b.items())
    for (const json& e : list) a[key].push_back(e);
  return a;
}
}  // namespace

json Generation::EchoLogprobsJson(Choice& c, size_t prompt) const {
  const std::vector<int32_t>& ids = spec_.prompts.at(prompt);
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (size_t p = 0; p < ids.size(); ++p) {
    const std::string piece = Piece(ids[p]);
    out["tokens"].push_back(piece);
    if (p == 0 || p > c.prompt_logprobs.size()) {  // nothing precedes the first token
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
    } else {
      const TokenLogprobs& lp = c.prompt_logprobs[p - 1];
      out["token_logprobs"].push_back(lp.logprob);
      json top = json::object();
      const size_t k = std::min(lp.top.size(), static_cast<size_t>(std::max(spec_.echo_logprobs, 0)));
      for (size_t i = 0; i < k; ++i) top[Piece(lp.top[i].token)] = lp.top[i].logprob;
      out["top_logprobs"].push_back(top);
    }
    out["text_offset"].push_back(c.text_offset);
    c.text_offset += piece.size();
  }
  return out;
}

json Generation::PromptLogprobsJson(const Choice& c, size_t prompt) const {
  const std::vector<int32_t>& ids = spec_.prompts.at(prompt);
  json out = json::array({nullptr});
  auto entry = [&](float logprob, int32_t rank, int32_t id) {
    return json{{"logprob", logprob}, {"rank", rank}, {"decoded_token", Piece(id)}};
  };
  for (size_t p = 1; p < ids.size(); ++p) {
    if (p > c.prompt_logprobs.size()) {
      out.push_back(nullptr);
      continue;
    }
    // vLLM's shape: the prompt token itself, then the most likely alternatives.
    const TokenLogprobs& lp = c.prompt_logprobs[p - 1];
    json e = json::object();
    e[std::to_string(ids[p])] = entry(lp.logprob, lp.rank, ids[p]);
    const size_t k = std::min(lp.top.size(), static_cast<size_t>(std::max(spec_.prompt_logprobs, 0)));
    for (size_t i = 0; i < k; ++i)
      if (const std::string key = std::to_string(lp.top[i].token); !e.contains(key))
        e[key] = entry(lp.top[i].logprob, static_cast<int32_t>(i) + 1, lp.top[i].token);
    out.push_back(std::move(e));
  }
  return out;
}

json Generation::LogprobsJson(Choice& c, const std::vector<int32_t>& tokens,
                              const std::vector<TokenLogprobs>& lps) const {
  const size_t count = std::min(tokens.size(), lps.size());
  if (spec_.api == Api::kChat) {
    auto bytes = [](const std::string& s) {
      json b = json::array();
      for (unsigned char ch : s) b.push_back(ch);
      return b;
    };
    json content = json::array();
    for (size_t i = 0; i < count; ++i) {
      const std::string p = Piece(tokens[i]);
      json top = json::array();
      for (const TokenLogprob& t : lps[i].top) {
        const std::string tp = Piece(t.token);
        top.push_back({{"token", tp}, {"logprob", t.logprob}, {"bytes", bytes(tp)}});
      }
      content.push_back(
          {{"token", p}, {"logprob", lps[i].logprob}, {"bytes", bytes(p)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (size_t i = 0; i < count; ++i) {
    const std::string p = Piece(tokens[i]);
    out["tokens"].push_back(p);
    out["token_logprobs"].push_back(lps[i].logprob);
    json top = json::object();
    for (const TokenLogprob& t : lps[i].top) top[Piece(t.token)] = t.logprob;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(c.text_offset);
    c.text_offset += p.size();
  }
  return out;
}

// Indices of the returned choices, prompt-major: all of them, or with best_of the `keep` of
// each prompt's n candidates with the highest mean token log-probability (OpenAI's rule).
const std::vector<size_t>& Generation::Returned() {
  if (!returned_.empty()) return returned_;
  const size_t n = static_cast<size_t>(spec_.n);
  const size_t keep = spec_.keep > 0 ? static_cast<size_t>(spec_.keep) : n;
  for (size_t base = 0; base < choices_.size(); base += n) {
    std::vector<size_t> order(n);
    std::vector<double> mean(n, -INFINITY);
    for (size_t b = 0; b < n; ++b) {
      order[b] = base + b;
      const Choice& c = choices_[base + b];
      if (c.logprobs.empty()) continue;
      double sum = 0;
      for (const TokenLogprobs& t : c.logprobs) sum += t.logprob;
      mean[b] = sum / static_cast<double>(c.logprobs.size());
    }
    if (keep < n)
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return mean[x - base] > mean[y - base]; });
    returned_.insert(returned_.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  return returned_;
}

json Generation::Usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (int32_t p : spec_.prompt_tokens) prompt += p;
  for (const Choice& c : choices_) completion += c.output_tokens;
  // Branches of one prompt share its cached blocks: count each prompt once.
  const size_t n = static_cast<size_t>(spec_.n);
  for (size_t base = 0; base < choices_.size(); base += n) {
    int32_t most = 0;
    for (size_t b = 0; b < n; ++b) most = std::max(most, choices_[base + b].cached_prompt_tokens);
    cached += most;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json Generation::ChunkBase() const {
  json j;
  j["id"] = spec_.id;
  j["object"] = spec_.api == Api::kChat ? "chat.completion.chunk" : "text_completion";
  j["created"] = spec_.created;
  j["model"] = spec_.model;
  j["choices"] = json::array();
  return j;
}

std::optional<ApiError> Generation::EngineFailure() const {
  Status st = engine_->EngineStatus();
  if (st.ok()) return std::nullopt;
  return ApiError{500, "The engine failed while generating: " + st.ToString()};
}

std::variant<json, ApiError> Generation::Complete() {
  while (!channel_->Done()) {
    std::vector<RequestOutput> outs = channel_->Wait(std::chrono::milliseconds(200));
    if (outs.empty())
      if (std::optional<ApiError> e = EngineFailure()) return *e;  // no more outputs will come
    for (RequestOutput& o : outs) Apply(std::move(o));
  }
  json j;
  j["id"] = spec_.id;
  j["object"] = spec_.api == Api::kChat ? "chat.completion" : "text_completion";
  j["created"] = spec_.created;
  j["model"] = spec_.model;
  j["choices"] = json::array();
  for (size_t out = 0; out < Returned().size(); ++out) {
    const size_t i = Returned()[out];
    Choice& c = choices_[i];
    json choice;
    choice["index"] = out;
    if (spec_.api == Api::kChat) {
      choice["message"] = c.out ? c.out->Message() : json{{"role", "assistant"}, {"content", c.text}};
    } else {
      const std::string& echo =
          spec_.echo.empty() ? std::string() : spec_.echo[i / static_cast<size_t>(spec_.n)];
      choice["text"] = echo + c.text;
    }
    const size_t prompt = i / static_cast<size_t>(spec_.n);
    json echoed = spec_.echo_logprobs >= 0 ? EchoLogprobsJson(c, prompt) : json();  // offsets first
    json lp = spec_.logprobs ? LogprobsJson(c, c.tokens, c.logprobs) : json();
    choice["logprobs"] = echoed.is_null() ? lp : Concat(std::move(echoed), lp);
    choice["finish_reason"] = c.finish_reason;
    if (spec_.api == Api::kCompletion && spec_.prompt_logprobs >= 0)
      choice["prompt_logprobs"] = PromptLogprobsJson(c, prompt);
    j["choices"].push_back(std::move(choice));
  }
  j["usage"] = Usage();
  // vLLM's chat responses carry the (one) prompt's logprobs beside the choices.
  if (spec_.api == Api::kChat && spec_.prompt_logprobs >= 0 && !choices_.empty())
    j["prompt_logprobs"] = PromptLogprobsJson(choices_[0], 0);
  return j;
}

// A chat delta's parts as OpenAI's chunks: reasoning_content, content, then each call's
// delta (index, id, type and name first; argument fragments after). The logprobs ride on the
// first chunk (or on an empty-content one when the text is all held back).
bool Generation::SendChatDelta(const Delta& d, json lp,
                               const std::function<bool(json, json)>& send) const {
  bool sent = false;
  auto out = [&](json delta) {
    sent = true;
    return send(std::move(delta), std::exchange(lp, json()));
  };
  if (!d.chat.reasoning.empty() && !out({{"reasoning_content", d.chat.reasoning}})) return false;
  if (!d.chat.content.empty() && !out({{"content", d.chat.content}})) return false;
  for (const ChatDelta::Call& c : d.chat.calls) {
    json call = {{"index", c.index}};
    if (!c.id.empty()) {
      call["id"] = c.id;
      call["type"] = "function";
      call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
    } else {
      call["function"] = {{"arguments", c.arguments}};
    }
    if (!out({{"tool_calls", json::array({call})}})) return false;
  }
  if (!sent && !lp.is_null()) return send({{"content", ""}}, std::move(lp));
  return true;
}

bool Generation::Stream(const std::function<bool(std::string_view)>& write,
                        const std::function<bool()>& client_alive) {
  auto send = [&](json chunk) {
    if (spec_.include_usage) chunk["usage"] = nullptr;
    return write("data: " + Dump(chunk) + "\n\n");
  };
  auto choice_chunk = [&](size_t index, json body) {
    json chunk = ChunkBase();
    json choice = {{"index", index}};
    for (auto& [k, v] : body.items()) choice[k] = v;
    chunk["choices"].push_back(std::move(choice));
    return chunk;
  };
  // Openers: the assistant role (chat), the echoed prompt (completions).
  for (size_t i = 0; i < choices_.size(); ++i) {
    bool ok = true;
    if (spec_.api == Api::kChat) {
      ok = send(choice_chunk(i, {{"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}));
    } else if (!spec_.echo.empty() && spec_.echo_logprobs < 0) {  // else with its logprobs, once scored
      ok = send(choice_chunk(i, {{"text", spec_.echo[i / static_cast<size_t>(spec_.n)]},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}));
    }
    if (!ok) return Cancel(), false;
  }
  while (!channel_->Done()) {
    std::vector<RequestOutput> outs = channel_->Wait(std::chrono::milliseconds(100));
    if (outs.empty() && !client_alive()) return Cancel(), false;
    if (outs.empty())
      if (std::optional<ApiError> e = EngineFailure()) {
        // OpenAI's and vLLM's in-stream error: an event with the error object, then [DONE],
        // so that clients raise instead of taking the cut text as complete.
        return write("data: " + Dump(e->ToJson()) + "\n\n") && write("data: [DONE]\n\n");
      }
    for (RequestOutput& o : outs) {
      Delta d = Apply(std::move(o));
      Choice& c = choices_[d.index];
      if (d.scored_prompt && spec_.api == Api::kCompletion) {  // the scored prompt leads the choice
        const size_t prompt = d.index / static_cast<size_t>(spec_.n);
        const bool echoed = spec_.echo_logprobs >= 0;
        json body = {{"text", echoed ? spec_.echo[prompt] : std::string()},
                     {"logprobs", echoed ? EchoLogprobsJson(c, prompt) : json()},
                     {"finish_reason", nullptr}};
        if (spec_.prompt_logprobs >= 0) body["prompt_logprobs"] = PromptLogprobsJson(c, prompt);
        if (!send(choice_chunk(d.index, std::move(body)))) return Cancel(), false;
      }
      json lp = spec_.logprobs && !d.tokens.empty() ? LogprobsJson(c, d.tokens, d.logprobs) : json();
      json finish = d.finished ? json(c.finish_reason) : json();
      bool ok = true;
      if (spec_.api == Api::kChat && c.out) {
        ok = SendChatDelta(d, lp, [&](json delta, json logprobs) {
          return send(choice_chunk(d.index, {{"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                                             {"finish_reason", nullptr}}));
        });
        if (ok && d.finished)
          ok = send(choice_chunk(
              d.index, {{"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}}));
      } else if (spec_.api == Api::kChat) {
        if (!d.text.empty() || !lp.is_null())
          ok = send(choice_chunk(
              d.index, {{"delta", {{"content", d.text}}}, {"logprobs", lp}, {"finish_reason", nullptr}}));
        if (ok && d.finished)
          ok = send(choice_chunk(
              d.index, {{"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}}));
      } else if (!d.text.empty() || !lp.is_null() || d.finished) {
        ok = send(choice_chunk(d.index, {{"text", d.text}, {"logprobs", lp}, {"finish_reason", finish}}));
      }
      if (!ok) return Cancel(), false;
    }
  }
  if (spec_.include_usage) {
    json chunk = ChunkBase();
    chunk["usage"] = Usage();
    if (!write("data: " + Dump(chunk) + "\n\n")) return false;
  }
  return write("data: [DONE]\n\n");
}

}  // namespace ferry::server
