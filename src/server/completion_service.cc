#include "server/completion_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "server/response_id.h"
#include "tool_calls/tool_grammar.h"

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

int64_t UnixNow() {
  return static_cast<int64_t>(std::time(nullptr));
}

Reply Json(json body, int status = 200) {
  return Reply{status, Dump(body), nullptr, 0};
}

}  // namespace

CompletionService::CompletionService(ServingContext ctx) : ctx_(std::move(ctx)) {
  if (ctx_.tokenizer)
    for (int32_t id = 0; id < ctx_.tokenizer->n_vocab(); ++id)
      if (ctx_.tokenizer->IsEog(id)) eog_ids_.push_back(id);
}

std::optional<ApiError> CompletionService::ResolveConstraints(GenerationRequest& gen) const {
  RequestOptions& o = gen.options;
  LogitsConstraints& c = o.sampling.constraints;
  auto check_ids = [&](const std::vector<int32_t>& ids, const char* param) -> std::optional<ApiError> {
    for (int32_t id : ids)
      if (id >= ctx_.n_vocab)
        return BadRequest(
            fmt::format("'{}' holds token id {}, outside the vocabulary [0, {})", param, id, ctx_.n_vocab),
            param);
    return std::nullopt;
  };
  std::vector<int32_t> biased;
  for (const auto& [id, bias] : c.logit_bias) biased.push_back(id);
  if (auto e = check_ids(biased, "logit_bias")) return e;
  if (auto e = check_ids(c.allowed_token_ids, "allowed_token_ids")) return e;
  if (auto e = check_ids(o.stop_token_ids, "stop_token_ids")) return e;
  if (c.min_tokens > 0 && o.max_tokens > 0 && c.min_tokens > o.max_tokens)
    return BadRequest(
        fmt::format("'min_tokens' ({}) must not exceed 'max_tokens' ({})", c.min_tokens, o.max_tokens),
        "min_tokens");
  if (c.min_tokens > 0) {
    c.min_tokens_banned = o.stop_token_ids;
    if (!o.ignore_eos)
      c.min_tokens_banned.insert(c.min_tokens_banned.end(), eog_ids_.begin(), eog_ids_.end());
  }
  if (!gen.bad_words.empty() && !ctx_.tokenizer)
    return BadRequest("'bad_words' needs a tokenizer; this model has none", "bad_words");
  for (const std::string& word : gen.bad_words) {
    // As vLLM: the word as tokenized at the start of the text and after a space.
    for (const std::string& variant : {word, " " + word}) {
      std::vector<int32_t> ids =
          ctx_.tokenizer->Encode(variant, /*add_special=*/false, /*parse_special=*/false);
      if (!ids.empty() && std::find(c.bad_words.begin(), c.bad_words.end(), ids) == c.bad_words.end())
        c.bad_words.push_back(std::move(ids));
    }
  }
  return std::nullopt;
}

Reply Reply::Error(const ApiError& e) {
  return Reply{e.status, Dump(e.ToJson()), nullptr, e.status == 503 ? 1 : 0};
}

std::optional<ApiError> CompletionService::CheckModel(const std::string& model) const {
  if (model.empty() || model == ctx_.model_name) return std::nullopt;
  return ApiError{
      404, fmt::format("The model `{}` does not exist. This server serves `{}`.", model, ctx_.model_name),
      "model", "model_not_found"};
}

Reply CompletionService::Run(GenerationSpec spec, GenerationRequest& gen,
                             std::vector<std::vector<int32_t>> prompts) {
  if (auto e = ResolveConstraints(gen)) return Reply::Error(*e);
  std::vector<RequestOptions> options;
  const bool best_of = gen.best_of > gen.options.n;
  std::shared_ptr<const constraint::CompiledGrammar> grammar;
  if (gen.constraint) {
    if (!ctx_.grammars) return Reply::Error(BadRequest("structured output needs the model's tokenizer"));
    auto compiled = ctx_.grammars->Get(*gen.constraint);
    if (!compiled.ok())
      return Reply::Error(BadRequest("Invalid structured output constraint: " + compiled.status().message()));
    grammar = *compiled;
  }
  for (std::vector<int32_t>& p : prompts) {
    // vLLM's truncate_prompt_tokens keeps the prompt's end (the most recent text).
    if (gen.truncate_prompt_tokens > 0 && static_cast<int64_t>(p.size()) > gen.truncate_prompt_tokens)
      p.erase(p.begin(), p.end() - gen.truncate_prompt_tokens);
    RequestOptions o = gen.options;
    o.sampling.constraint = grammar;
    if (best_of) {  // every candidate, ranked by its token logprobs at the end
      o.n = gen.best_of;
      o.logprobs = std::max(o.logprobs, 0);
    }
    const int64_t len = static_cast<int64_t>(p.size());
    if (len == 0) return Reply::Error(BadRequest("The prompt is empty (no tokens).", "prompt"));
    o.sampling.prompt_tokens = static_cast<int32_t>(len);  // presence/frequency: output tokens only
    if (o.max_tokens == 0 && !gen.prompt_only)
      o.max_tokens = static_cast<int32_t>(std::max<int64_t>(0, ctx_.max_model_len - len));
    o.prompt_logprobs = std::max(gen.prompt_logprobs, spec.echo_logprobs);
    if (len + o.max_tokens > ctx_.max_model_len || (o.max_tokens == 0 && !gen.prompt_only))
      return Reply::Error(BadRequest(
          fmt::format(
              "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the "
              "prompt, {} in the completion). Please reduce the length of the prompt or completion.",
              ctx_.max_model_len, len + std::max(o.max_tokens, 1), len, std::max(o.max_tokens, 1)),
          spec.api == Api::kChat ? "messages" : "prompt", "context_length_exceeded"));
    if (o.prompt_logprobs >= 0) spec.prompts.push_back(p);  // rendered with their logprobs
    options.push_back(std::move(o));
    spec.prompt_tokens.push_back(static_cast<int32_t>(len));
  }
  spec.prompt_logprobs = gen.prompt_logprobs;
  if (gen.use_beam_search) return RunBeamSearch(spec, gen, prompts, options);
  auto submitted = ctx_.engine->Submit(prompts, options);
  if (auto* e = std::get_if<ApiError>(&submitted)) return Reply::Error(*e);
  spec.n = best_of ? gen.best_of : gen.options.n;
  spec.keep = best_of ? gen.options.n : 0;
  spec.logprobs = gen.options.logprobs >= 0;
  spec.include_usage = gen.include_usage;
  spec.model = ctx_.model_name;
  spec.created = UnixNow();
  auto generation = std::make_shared<Generation>(std::move(spec), ctx_.tokenizer, ctx_.engine,
                                                 std::get<std::shared_ptr<OutputChannel>>(submitted));
  if (gen.stream) return Reply{200, "", std::move(generation), 0};
  std::variant<json, ApiError> complete = generation->Complete();
  if (auto* e = std::get_if<ApiError>(&complete)) return Reply::Error(*e);
  return Json(std::move(std::get<json>(complete)));
}

Reply CompletionService::RunBeamSearch(const GenerationSpec& spec, const GenerationRequest& gen,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       const std::vector<RequestOptions>& options) const {
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestOptions& o = options[i];
    BeamSearchOptions b;
    b.beam_width = o.n;
    b.max_tokens = o.max_tokens;
    b.length_penalty = gen.length_penalty;
    b.constraint = o.sampling.constraint;
    if (!o.ignore_eos) b.end_tokens = eog_ids_;
    b.end_tokens.insert(b.end_tokens.end(), o.stop_token_ids.begin(), o.stop_token_ids.end());
    StatusOr<std::vector<BeamHypothesis>> beams = ctx_.engine->BeamSearch(prompts[i], b);
    if (!beams.ok()) return Reply::Error(BadRequest("beam search: " + beams.status().message()));
    prompt_tokens += static_cast<int64_t>(prompts[i].size());
    for (BeamHypothesis& h : *beams) {
      if (h.finish_reason == "stop" && !h.tokens.empty()) h.tokens.pop_back();  // the end token is not text
      completion_tokens += static_cast<int64_t>(h.tokens.size());
      std::string text;
      if (ctx_.tokenizer) {
        IncrementalDetokenizer detok(*ctx_.tokenizer);
        for (int32_t t : h.tokens) text += detok.Push(t);
        text += detok.Flush();
      }
      json choice = {{"index", choices.size()}};
      if (spec.api == Api::kChat)
        choice["message"] = {{"role", "assistant"}, {"content", text}};
      else
        choice["text"] = text;
      choice["logprobs"] = nullptr;
      choice["finish_reason"] = h.finish_reason;
      choices.push_back(std::move(choice));
    }
  }
  return Json({{"id", spec.id},
               {"object", spec.api == Api::kChat ? "chat.completion" : "text_completion"},
               {"created", UnixNow()},
               {"model", ctx_.model_name},
               {"choices", std::move(choices)},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens},
                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}}});
}

Reply CompletionService::Completions(std::string_view body) {
  Parsed<CompletionRequest> parsed = ParseCompletionRequest(body, ctx_.limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Reply::Error(*e);
  CompletionRequest& r = std::get<CompletionRequest>(parsed);
  if (auto e = CheckModel(r.gen.model)) return Reply::Error(*e);
  if (!ctx_.tokenizer && (r.echo || !r.gen.options.stop.empty()))
    return Reply::Error(BadRequest("'echo' and 'stop' need a tokenizer; this model has none"));
  GenerationSpec spec;
  spec.api = Api::kCompletion;
  spec.id = NewResponseId("cmpl-");
  std::vector<std::vector<int32_t>> prompts;
  for (PromptInput& p : r.prompts) {
    if (p.text && !ctx_.tokenizer)
      return Reply::Error(
          BadRequest("text prompts need a tokenizer; this model has none: send token ids", "prompt"));
    std::vector<int32_t> ids = p.text ? ctx_.tokenizer->Encode(*p.text, true, true) : std::move(p.ids);
    if (r.echo) spec.echo.push_back(p.text ? *p.text : ctx_.tokenizer->Decode(ids));
    if (r.echo) spec.echo_logprobs = r.gen.options.logprobs;  // the prompt leads the logprobs too
    prompts.push_back(std::move(ids));
  }
  return Run(std::move(spec), r.gen, std::move(prompts));
}

Reply CompletionService::ChatCompletions(std::string_view body) {
  Parsed<ChatCompletionRequest> parsed = ParseChatCompletionRequest(body, ctx_.limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Reply::Error(*e);
  ChatCompletionRequest& r = std::get<ChatCompletionRequest>(parsed);
  if (auto e = CheckModel(r.gen.model)) return Reply::Error(*e);
  if (!ctx_.tokenizer)
    return Reply::Error(BadRequest("chat completions need a tokenizer; this model has none"));
  StatusOr<RenderedChat> prompt =
      ctx_.chat->Render(r.messages, r.add_generation_prompt, r.tools.tools_json, r.template_kwargs);
  if (!prompt.ok()) return Reply::Error(BadRequest(prompt.status().message(), "messages"));
  GenerationSpec spec;
  spec.api = Api::kChat;
  spec.id = NewResponseId("chatcmpl-");
  std::vector<std::vector<int32_t>> prompts = {ctx_.tokenizer->Encode(prompt->text, prompt->add_bos, true)};
  spec.chat_output = ChatOutputFor(r, prompts[0]);
  return Run(std::move(spec), r.gen, std::move(prompts));
}

// How the answer is read back (reasoning split, tool calls parsed), and what that asks of the
// request: a forced call's grammar, special tokens kept in the text (the parsers read
// [TOOL_CALLS], <|python_tag|>, ...), the constraint held back until the thinking ends.
ChatOutputConfig CompletionService::ChatOutputFor(ChatCompletionRequest& r,
                                                  const std::vector<int32_t>& prompt) const {
  ChatOutputConfig out;
  const tool_calls::ToolFormat format = ctx_.chat->tool_format();
  const constraint::TokenVocabulary* vocab = ctx_.grammars ? ctx_.grammars->vocab().get() : nullptr;
  // Harmony's channels are parsed with or without tools (its analysis channel is the reasoning).
  if (r.tools.parse() || format == tool_calls::ToolFormat::kHarmony) out.tools = format;
  if (r.tools.forced())
    r.gen.constraint = tool_calls::ToolCallGrammar(format, r.tools.Allowed(), r.tools.parallel,
                                                   /*after_opener=*/false, vocab);
  if (ctx_.chat->thinks()) {
    const int32_t open = ctx_.tokenizer->TokenId("<think>"), close = ctx_.tokenizer->TokenId("</think>");
    if (open >= 0 && close >= 0) {
      out.think_open = open;
      out.think_close = close;
      // The generation prompt may open the block itself (DeepSeek R1, QwQ, Qwen3.5) or open and
      // close it (Qwen3 with enable_thinking false): the last of the two tokens in the prompt says.
      bool closed = false;
      for (size_t i = prompt.size(); i-- > 0;)
        if (prompt[i] == open || prompt[i] == close) {
          out.starts_in_reasoning = prompt[i] == open;
          closed = !out.starts_in_reasoning;
          break;
        }
      // Constraints hold the answer, not the thinking: they start once </think> is out
      // (unless the prompt closed the block already).
      if (r.gen.constraint && !closed) r.gen.options.sampling.constraint_triggers = {close};
    }
  }
  // tool_choice auto: free text, and the call grammar from the model's opener token on
  // (formats whose calls always start with one; Llama 3 writes bare JSON).
  using tool_calls::ToolFormat;
  const int32_t opener = ctx_.tokenizer->TokenId(tool_calls::CallOpener(format));
  if (r.tools.parse() && !r.tools.forced() && !r.gen.constraint && opener >= 0 &&
      format != ToolFormat::kLlama3 && format != ToolFormat::kFunctionaryV31) {
    r.gen.constraint =
        tool_calls::ToolCallGrammar(format, r.tools.tools, r.tools.parallel, /*after_opener=*/true, vocab);
    r.gen.options.sampling.constraint_triggers = {opener};
  }
  if (out.active()) {
    r.gen.options.skip_special_tokens = false;
    r.gen.options.spaces_between_special_tokens = false;
  }
  return out;
}

json CompletionService::ModelCard() const {
  return {{"id", ctx_.model_name},
          {"object", "model"},
          {"created", ctx_.created},
          {"owned_by", "ferry"},
          {"root", ctx_.model_name},
          {"parent", nullptr},
          {"max_model_len", ctx_.max_model_len}};
}

Reply CompletionService::Models() const {
  return Json({{"object", "list"}, {"data", json::array({ModelCard()})}});
}

Reply CompletionService::Model(const std::string& id) const {
  if (auto e = CheckModel(id.empty() ? "?" : id)) return Reply::Error(*e);
  return Json(ModelCard());
}

// vLLM's /tokenize: {"prompt": text, "add_special_tokens": true} or {"messages": [...]}.
Reply CompletionService::Tokenize(std::string_view body) const {
  Parsed<json> parsed = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Reply::Error(*e);
  const json& j = std::get<json>(parsed);
  if (auto e = CheckModel(j.value("model", std::string()))) return Reply::Error(*e);
  if (!ctx_.tokenizer) return Reply::Error(BadRequest("this model has no tokenizer"));
  std::vector<int32_t> ids;
  if (j.contains("messages")) {
    Parsed<ChatCompletionRequest> chat = ParseChatCompletionRequest(body, ctx_.limits);
    if (auto* e = std::get_if<ApiError>(&chat)) return Reply::Error(*e);
    const ChatCompletionRequest& r = std::get<ChatCompletionRequest>(chat);
    StatusOr<RenderedChat> prompt =
        ctx_.chat->Render(r.messages, r.add_generation_prompt, r.tools.tools_json, r.template_kwargs);
    if (!prompt.ok()) return Reply::Error(BadRequest(prompt.status().message(), "messages"));
    ids = ctx_.tokenizer->Encode(prompt->text, prompt->add_bos, true);
  } else if (j.contains("content")) {
    return TokenizeContent(j);
  } else {
    if (!j.contains("prompt") || !j["prompt"].is_string())
      return Reply::Error(BadRequest("'prompt' (a string), 'content' or 'messages' is required", "prompt"));
    const json& add = j.contains("add_special_tokens") ? j["add_special_tokens"] : json(true);
    if (!add.is_boolean())
      return Reply::Error(
          InvalidType("Invalid type for 'add_special_tokens': expected a boolean", "add_special_tokens"));
    ids = ctx_.tokenizer->Encode(j["prompt"].get<std::string>(), add.get<bool>(), true);
  }
  return Json({{"count", ids.size()}, {"max_model_len", ctx_.max_model_len}, {"tokens", ids}});
}

// llama-server's /tokenize: {"content": text, "add_special": false, "with_pieces": false} ->
// {"tokens": [id, ...]} or, with pieces, {"tokens": [{"id", "piece"}, ...]}.
Reply CompletionService::TokenizeContent(const json& j) const {
  if (!j["content"].is_string()) return Reply::Error(InvalidType("'content' must be a string", "content"));
  bool add_special = false, with_pieces = false;
  for (auto [key, out] : {std::pair{"add_special", &add_special}, std::pair{"with_pieces", &with_pieces}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean())
      return Reply::Error(InvalidType(fmt::format("'{}' must be a boolean", key), key));
    *out = j[key].get<bool>();
  }
  const std::vector<int32_t> ids = ctx_.tokenizer->Encode(j["content"].get<std::string>(), add_special, true);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", ctx_.tokenizer->TokenToPiece(id, /*render_special=*/true)}});
    else
      tokens.push_back(id);
  }
  return Json({{"tokens", tokens}});
}

Reply CompletionService::Version() const {
  return Json({{"version", FERRY_VERSION}});
}

Reply CompletionService::Detokenize(std::string_view body) const {
  Parsed<json> parsed = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Reply::Error(*e);
  const json& j = std::get<json>(parsed);
  if (auto e = CheckModel(j.value("model", std::string()))) return Reply::Error(*e);
  if (!ctx_.tokenizer) return Reply::Error(BadRequest("this model has no tokenizer"));
  if (!j.contains("tokens") || !j["tokens"].is_array())
    return Reply::Error(InvalidType("'tokens' (a list of token ids) is required", "tokens"));
  std::vector<int32_t> ids;
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer()) return Reply::Error(InvalidType("'tokens' must hold integers", "tokens"));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= ctx_.tokenizer->n_vocab())
      return Reply::Error(BadRequest(
          fmt::format("token id {} is outside the vocabulary [0, {})", id, ctx_.tokenizer->n_vocab()),
          "tokens"));
    ids.push_back(static_cast<int32_t>(id));
  }
  std::string text = ctx_.tokenizer->Decode(ids);
  // The inverse of /tokenize: drop the space SentencePiece put before the text.
  if (ctx_.tokenizer->add_space_prefix() && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return Json({{"prompt", text}, {"content", text}});  // vLLM's field and llama-server's
}

}  // namespace ferry::server
