// Generation: one HTTP request's engine requests seen as OpenAI choices. It folds the engine's
// incremental outputs into per-choice text, tokens, logprobs and finish reasons, and renders
// them either as one response object or as server-sent events in OpenAI's chunk format.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/chat_output.h"
#include "server/engine_client.h"
#include "tokenizer/tokenizer.h"

namespace ferry::server {

enum class Api { kCompletion, kChat };

struct GenerationSpec {
  Api api = Api::kCompletion;
  std::string id;     // "cmpl-..." / "chatcmpl-..."
  std::string model;  // the served model name
  int64_t created = 0;
  int32_t n = 1;                       // choices generated per prompt
  int32_t keep = 0;                    // best_of: choices returned per prompt (0: all n)
  std::vector<int32_t> prompt_tokens;  // [prompts] prompt lengths, for usage
  std::vector<std::string> echo;  // [prompts] text to prepend to each choice (completions' echo), or empty
  bool logprobs = false;          // outputs carry logprobs
  // Completions' echo with logprobs (>= 0: top alternatives): the prompt's tokens lead `logprobs`.
  int32_t echo_logprobs = -1;
  int32_t prompt_logprobs = -1;  // vLLM's prompt_logprobs (>= 0: top alternatives per prompt token)
  std::vector<std::vector<int32_t>> prompts;  // [prompts][tokens] ids, kept when the prompt is scored
  bool include_usage = false;     // streaming: a final usage chunk
  // Chat: split reasoning and parse tool calls (chat_output.h) when active.
  ChatOutputConfig chat_output;
};

class Generation {
 public:
  Generation(GenerationSpec spec, const Tokenizer* tokenizer, EngineClient* engine,
             std::shared_ptr<OutputChannel> channel);
  ~Generation();  // aborts whatever is unfinished (the client is gone)

  // Waits for every choice; the whole response object, or a 500 when the engine failed.
  std::variant<nlohmann::ordered_json, ApiError> Complete();
  // Writes the SSE stream ("data: {...}\n\n" ... "data: [DONE]\n\n") through `write` until it is
  // complete (true; an engine failure sends an error event before [DONE]), or until `write` fails or
  // `client_alive` turns false (false, requests aborted).
  bool Stream(const std::function<bool(std::string_view)>& write, const std::function<bool()>& client_alive);
  // Aborts the unfinished requests (idempotent).
  void Cancel();
  const GenerationSpec& spec() const { return spec_; }

 private:
  struct Choice {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> logprobs;
    std::vector<TokenLogprobs> prompt_logprobs;  // [prompt tokens - 1] entry p scores token p + 1
    size_t text_offset = 0;  // characters before this choice's next token (completions' text_offset)
    std::string finish_reason;
    int32_t output_tokens = 0;
    int32_t cached_prompt_tokens = 0;  // prompt tokens the prefix cache served (shared by branches)
    std::unique_ptr<ChatOutput> out;   // spec_.chat_output active: the message's parts
  };
  // What one output added to a choice.
  struct Delta {
    size_t index = 0;
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> logprobs;
    bool finished = false;
    bool scored_prompt = false;  // this output brought the prompt's logprobs
    ChatDelta chat;  // Choice::out: what this output added to each part
  };
  Delta Apply(RequestOutput&& o);
  nlohmann::ordered_json LogprobsJson(Choice& c, const std::vector<int32_t>& tokens,
                                      const std::vector<TokenLogprobs>& lps) const;
  // The echoed prompt's part of completions' logprobs (its first token has none), and vLLM's
  // prompt_logprobs list ([null, {"id": {logprob, rank, decoded_token}}, ...]).
  nlohmann::ordered_json EchoLogprobsJson(Choice& c, size_t prompt) const;
  nlohmann::ordered_json PromptLogprobsJson(const Choice& c, size_t prompt) const;
  std::string Piece(int32_t id) const;  // a token's text (its id without a tokenizer)
  nlohmann::ordered_json Usage() const;
  std::optional<ApiError> EngineFailure() const;  // the 500 once the engine has failed
  const std::vector<size_t>& Returned();
  nlohmann::ordered_json ChunkBase() const;
  bool SendChatDelta(const Delta& d, nlohmann::ordered_json lp,
                     const std::function<bool(nlohmann::ordered_json, nlohmann::ordered_json)>& send) const;

  GenerationSpec spec_;
  const Tokenizer* tok_;
  EngineClient* engine_;
  std::shared_ptr<OutputChannel> channel_;
  std::vector<Choice> choices_;  // [prompts * n], prompt-major
  std::vector<size_t> returned_;  // [prompts * keep] indices into choices_ (Returned())
};

// JSON text with invalid UTF-8 replaced (token pieces may split characters).
std::string Dump(const nlohmann::ordered_json& j);

}  // namespace ferry::server
