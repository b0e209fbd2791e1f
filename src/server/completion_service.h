// CompletionService: the OpenAI endpoints over the engine, independent of the HTTP library.
// Each call takes a request body and returns a Reply: a JSON body with its status, or a
// Generation to stream as server-sent events.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "server/chat_prompt.h"
#include "server/engine_client.h"
#include "server/generation.h"
#include "server/openai_schema.h"
#include "server/sse_translator.h"
#include "tokenizer/tokenizer.h"

namespace ferry::server {

struct ServingContext {
  std::string model_name;     // the served model name (--served-model-name)
  int32_t max_model_len = 0;  // positions per sequence
  int32_t n_vocab = 0;        // the model's vocabulary (token ids are checked against it)
  const Tokenizer* tokenizer = nullptr;
  EngineClient* engine = nullptr;
  const ChatPrompt* chat = nullptr;
  SchemaLimits limits;
  constraint::GrammarCache* grammars = nullptr;  // compiled constraints over the model's vocabulary
  int64_t created = 0;  // server start (Unix seconds), for /v1/models
};

struct Reply {
  int status = 200;
  std::string body;                    // JSON (when stream is null)
  std::shared_ptr<Generation> stream;  // set for "stream": true
  int retry_after_s = 0;               // > 0: a Retry-After header (503)
  std::shared_ptr<SseTranslator> translate = nullptr;  // with stream: rewrites its events (another API's)

  static Reply Error(const ApiError& e);
};

class CompletionService {
 public:
  explicit CompletionService(ServingContext ctx);

  Reply Completions(std::string_view body);
  Reply ChatCompletions(std::string_view body);
  Reply Models() const;
  Reply Model(const std::string& id) const;  // GET /v1/models/{id}
  Reply Version() const;                     // GET /version
  Reply Tokenize(std::string_view body) const;
  Reply Detokenize(std::string_view body) const;

 private:
  // Checks model names and context lengths, fills default max_tokens, submits, and answers
  // (streamed or whole).
  Reply Run(GenerationSpec spec, GenerationRequest& gen, std::vector<std::vector<int32_t>> prompts);
  std::optional<ApiError> CheckModel(const std::string& model) const;
  nlohmann::ordered_json ModelCard() const;
  Reply TokenizeContent(const nlohmann::ordered_json& body) const;
  // Checks the token ids the request names and turns bad_words and min_tokens into sampling
  // constraints (they need the tokenizer).
  std::optional<ApiError> ResolveConstraints(GenerationRequest& gen) const;
  // use_beam_search: the n best hypotheses of each prompt, best first, as one response.
  Reply RunBeamSearch(const GenerationSpec& spec, const GenerationRequest& gen,
                      const std::vector<std::vector<int32_t>>& prompts,
                      const std::vector<RequestOptions>& options) const;
  ChatOutputConfig ChatOutputFor(ChatCompletionRequest& r, const std::vector<int32_t>& prompt) const;

  ServingContext ctx_;
  std::vector<int32_t> eog_ids_;  // the tokenizer's end-of-generation tokens (min_tokens holds them back)
};

}  // namespace ferry::server
