// OpenAI request schemas: parses and validates the JSON bodies of /v1/completions and
// /v1/chat/completions into engine RequestOptions, field by field as the OpenAI API reference
// defines them (plus vLLM's top_k, min_p, ignore_eos, repetition_penalty extensions).
// Malformed JSON, out-of-range values and fields of the wrong JSON type give 400 (as OpenAI and
// vLLM answer; the SDKs raise BadRequestError).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "constraint/constraint.h"
#include "engine/request.h"
#include "server/api_error.h"
#include "server/tool_request.h"

namespace ferry::server {

// A prompt as the client sent it: text, or token ids.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;  // when text is unset
};

// Fields shared by completions and chat completions.
struct GenerationRequest {
  std::string model;       // "" when absent: the served model
  RequestOptions options;  // n, sampling, stop, logprobs; max_tokens 0 = the rest of the context
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completions' best_of: candidates per prompt, of which the n with the highest mean token
  // log-probability are returned (0: n). Not streamable.
  int32_t best_of = 0;
  std::vector<std::string> bad_words;  // vLLM's: tokenized by the service into sampling constraints
  int32_t truncate_prompt_tokens = 0;  // > 0: keep only the prompt's last this-many tokens (vLLM's)
  int32_t prompt_logprobs = -1;        // vLLM's: >= 0 scores every prompt token with this many alternatives
  bool prompt_only = false;            // completions' explicit max_tokens 0: score or echo the prompt only
  // vLLM's use_beam_search: `n` beams, deterministic, the n best hypotheses returned best first,
  // scored cum_logprob / length^length_penalty (engine/beam_search.h).
  bool use_beam_search = false;
  float length_penalty = 1.0f;
  // Structured output (structured_output_request.h); compiled when the request is run.
  std::optional<constraint::ConstraintSpec> constraint;
};

struct CompletionRequest {
  GenerationRequest gen;
  std::vector<PromptInput> prompts;  // one engine request each; choices are prompt-major
  bool echo = false;
};

struct ChatCompletionRequest {
  GenerationRequest gen;
  // Validated messages with `content` flattened to a string (text parts joined).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = true;
  bool logprobs = false;  // chat's boolean `logprobs`; top_logprobs is in gen.options.logprobs
  ToolRequest tools;     // tools, tool_choice, parallel_tool_calls
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

struct SchemaLimits {
  int32_t max_n = 128;        // parallel samples per request
  int32_t max_logprobs = 20;  // top alternatives per token
  int32_t max_stop = 16;      // stop strings per request
};

template <typename T>
using Parsed = std::variant<T, ApiError>;

Parsed<CompletionRequest> ParseCompletionRequest(std::string_view body, const SchemaLimits& limits = {});
Parsed<ChatCompletionRequest> ParseChatCompletionRequest(std::string_view body,
                                                         const SchemaLimits& limits = {});

// The body as a JSON object, or the 400 for malformed JSON / a non-object.
Parsed<nlohmann::ordered_json> ParseJsonObject(std::string_view body);

}  // namespace ferry::server
