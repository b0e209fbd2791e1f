#include "server/openai_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "server/structured_output_request.h"

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "null";
  }
}

// Reads optional fields of one JSON object; the first error wins and later reads are no-ops.
// An absent or null field leaves its output unchanged.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  const json* Get(const char* key) const {
    read_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  bool Has(const char* key) const { return Get(key) != nullptr; }

  template <typename Int>
  void Integer(const char* key, int64_t lo, int64_t hi, Int& out) {
    const json* v = Check(key);
    if (!v) return;
    if (!v->is_number_integer()) return WrongType(key, *v, "an integer");
    const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
    if (too_big || v->get<int64_t>() > hi || v->get<int64_t>() < lo)
      return Fail(
          BadRequest(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v->dump()), key));
    out = static_cast<Int>(v->get<int64_t>());
  }
  void Number(const char* key, double lo, double hi, float& out, bool lo_open = false) {
    const json* v = Check(key);
    if (!v) return;
    if (!v->is_number()) return WrongType(key, *v, "a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
      return Fail(BadRequest(
          fmt::format("'{}' must be in {}{}, {}], got {}", key, lo_open ? "(" : "[", lo, hi, v->dump()),
          key));
    out = static_cast<float>(x);
  }
  void Bool(const char* key, bool& out) {
    const json* v = Check(key);
    if (!v) return;
    if (!v->is_boolean()) return WrongType(key, *v, "a boolean");
    out = v->get<bool>();
  }
  void String(const char* key, std::string& out) {
    const json* v = Check(key);
    if (!v) return;
    if (!v->is_string()) return WrongType(key, *v, "a string");
    out = v->get<std::string>();
  }
  void WrongType(const std::string& key, const json& v, const char* expected) {
    Fail(InvalidType(
        fmt::format("Invalid type for '{}': expected {}, but got {} instead.", key, expected, TypeName(v)),
        key));
  }
  void Fail(ApiError e) {
    if (!error) error = std::move(e);
  }
  std::optional<ApiError> error;

  // A 400 for the first top-level field (in the body's order) that no reader asked for and
  // `others` does not name: a field the server would not act on must not look accepted.
  // others: the keys read outside Fields (ReadStructuredOutput's, ReadToolRequest's, ...).
  std::optional<ApiError> RejectUnread(
      std::initializer_list<std::span<const std::string_view>> others) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      bool known = read_.count(it.key()) > 0;
      for (std::span<const std::string_view> list : others)
        known = known || std::find(list.begin(), list.end(), it.key()) != list.end();
      if (known) continue;
      return BadRequest(
          fmt::format("'{}' is not a field this server supports (docs/server.md lists them)", it.key()),
          it.key());
    }
    return std::nullopt;
  }

 private:
  const json* Check(const char* key) const { return error ? nullptr : Get(key); }
  const json& obj_;
  mutable std::set<std::string, std::less<>> read_;  // keys some reader looked up
};

// OpenAI's `user` (an end-user id for abuse monitoring): informational, no effect here.
constexpr std::string_view kInformationalFields[] = {"user"};

// stop: a string or a list of strings.
void ReadStop(Fields& f, const SchemaLimits& limits, std::vector<std::string>& out) {
  const json* v = f.Get("stop");
  if (!v || f.error) return;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (static_cast<int32_t>(v->size()) > limits.max_stop)
      return f.Fail(BadRequest(
          fmt::format("'stop' has {} strings; at most {} are allowed", v->size(), limits.max_stop), "stop"));
    for (const json& s : *v) {
      if (!s.is_string()) return f.WrongType("stop", s, "a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    return f.WrongType("stop", *v, "a string or a list of strings");
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
}

// A list of token ids (non-negative integers); the vocabulary bound is checked later.
void ReadTokenIds(Fields& f, const char* key, std::vector<int32_t>& out) {
  const json* v = f.Get(key);
  if (!v || f.error) return;
  if (!v->is_array()) return f.WrongType(key, *v, "a list of token ids");
  for (const json& t : *v) {
    if (!t.is_number_integer()) return f.WrongType(key, t, "a list of token ids");
    if (t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return f.Fail(BadRequest(fmt::format("'{}' holds {}, which is not a token id", key, t.dump()), key));
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
}

// OpenAI's logit_bias ({"token id": bias in [-100, 100]}) and vLLM's extensions that constrain
// or end generation.
void ReadVllmExtensions(Fields& f, const SchemaLimits& limits, GenerationRequest& g) {
  RequestOptions& o = g.options;
  LogitsConstraints& c = o.sampling.constraints;
  if (const json* lb = f.Get("logit_bias"); lb && !f.error) {
    if (!lb->is_object()) return f.WrongType("logit_bias", *lb, "an object mapping token ids to biases");
    for (const auto& [key, bias] : lb->items()) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
      }
      if (used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        return f.Fail(BadRequest(fmt::format("'logit_bias' key '{}' is not a token id", key), "logit_bias"));
      if (!bias.is_number()) return f.WrongType("logit_bias", bias, "a number");
      const double b = bias.get<double>();
      if (!(b >= -100 && b <= 100))
        return f.Fail(BadRequest(
            fmt::format("'logit_bias' for token {} must be in [-100, 100], got {}", key, bias.dump()),
            "logit_bias"));
      c.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
    }
  }
  f.Integer("min_tokens", 0, int64_t{1} << 30, c.min_tokens);
  ReadTokenIds(f, "stop_token_ids", o.stop_token_ids);
  ReadTokenIds(f, "allowed_token_ids", c.allowed_token_ids);
  if (f.Has("allowed_token_ids") && c.allowed_token_ids.empty() && !f.error)
    f.Fail(BadRequest("'allowed_token_ids' must not be empty", "allowed_token_ids"));
  f.Bool("include_stop_str_in_output", o.include_stop_str_in_output);
  if (const json* bw = f.Get("bad_words"); bw && !f.error) {
    if (!bw->is_array()) return f.WrongType("bad_words", *bw, "a list of strings");
    for (const json& w : *bw) {
      if (!w.is_string()) return f.WrongType("bad_words", w, "a list of strings");
      if (!w.get<std::string>().empty()) g.bad_words.push_back(w.get<std::string>());
    }
  }
  f.Integer("truncate_prompt_tokens", 1, int64_t{1} << 30, g.truncate_prompt_tokens);
  f.Integer("prompt_logprobs", 0, limits.max_logprobs, g.prompt_logprobs);
  f.Bool("skip_special_tokens", o.skip_special_tokens);
  f.Bool("spaces_between_special_tokens", o.spaces_between_special_tokens);
}

// vLLM's beam search: a deterministic search over whole hypotheses, so the sampling, streaming
// and per-token fields have no meaning with it and are refused by name.
std::optional<ApiError> ReadBeamSearch(Fields& f, const json& obj, GenerationRequest& g) {
  f.Bool("use_beam_search", g.use_beam_search);
  f.Number("length_penalty", -10.0, 10.0, g.length_penalty);
  if (f.error) return f.error;
  if (!g.use_beam_search) {
    if (f.Has("length_penalty"))
      return BadRequest("'length_penalty' applies only with 'use_beam_search': true", "length_penalty");
    return std::nullopt;
  }
  static constexpr const char* kRefused[] = {"stream",
                                             "logprobs",
                                             "top_logprobs",
                                             "echo",
                                             "best_of",
                                             "stop",
                                             "top_p",
                                             "top_k",
                                             "min_p",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "repetition_penalty",
                                             "seed",
                                             "logit_bias",
                                             "min_tokens",
                                             "allowed_token_ids",
                                             "bad_words",
                                             "prompt_logprobs",
                                             "tools",
                                             "tool_choice",
                                             "include_stop_str_in_output",
                                             "skip_special_tokens",
                                             "spaces_between_special_tokens"};
  for (const char* key : kRefused)
    if (obj.contains(key))
      return BadRequest(fmt::format("'{}' is not supported with 'use_beam_search' (a deterministic search "
                                    "over whole hypotheses, returned when complete)",
                                    key),
                        key);
  if (f.Has("temperature") && g.options.sampling.temperature != 0)
    return BadRequest("'use_beam_search' is deterministic: 'temperature' must be 0 or absent", "temperature");
  return std::nullopt;
}

// The fields both endpoints share. OpenAI's sampling defaults (temperature 1, top_p 1, no
// top_k/min_p/repeat penalty) replace Ferry's CLI defaults.
// min_max_tokens: 0 on completions, where max_tokens 0 asks for the prompt only.
void ReadGeneration(Fields& f, const SchemaLimits& limits, GenerationRequest& g, int64_t min_max_tokens = 1) {
  f.String("model", g.model);
  RequestOptions& o = g.options;
  o.max_tokens = 0;
  o.sampling = SamplingParams{};
  o.sampling.temperature = 1.0f;
  o.sampling.top_p = 1.0f;
  o.sampling.top_k = 0;
  o.sampling.min_p = 0.0f;
  o.sampling.repeat_last_n = -1;  // repetition_penalty sees the whole history (prompt and output)
  f.Integer("max_tokens", min_max_tokens, int64_t{1} << 30, o.max_tokens);
  f.Integer("n", 1, limits.max_n, o.n);
  f.Number("temperature", 0.0, 2.0, o.sampling.temperature);
  f.Number("top_p", 0.0, 1.0, o.sampling.top_p, /*lo_open=*/true);
  f.Integer("top_k", -1, std::numeric_limits<int32_t>::max(), o.sampling.top_k);
  if (o.sampling.top_k < 0) o.sampling.top_k = 0;  // vLLM's -1: off
  f.Number("min_p", 0.0, 1.0, o.sampling.min_p);
  f.Number("presence_penalty", -2.0, 2.0, o.sampling.presence_penalty);
  f.Number("frequency_penalty", -2.0, 2.0, o.sampling.frequency_penalty);
  f.Number("repetition_penalty", 0.0, 10.0, o.sampling.repeat_penalty, /*lo_open=*/true);
  int64_t seed = 0;
  if (f.Has("seed")) {
    f.Integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), seed);
    o.sampling.seed = static_cast<uint64_t>(seed);
    // Ferry's "random seed" sentinel is a fixed seed here: move it to a neighbour.
    if (o.sampling.seed == SamplingParams{}.seed) o.sampling.seed ^= uint64_t{1} << 40;
  }
  ReadStop(f, limits, o.stop);
  f.Bool("ignore_eos", o.ignore_eos);
  f.Bool("stream", g.stream);
  if (const json* so = f.Get("stream_options"); so && !f.error) {
    if (!so->is_object()) return f.WrongType("stream_options", *so, "an object");
    if (!g.stream)
      return f.Fail(BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options"));
    Fields sf(*so);
    sf.Bool("include_usage", g.include_usage);
    if (sf.error) f.Fail(*sf.error);
  }
  ReadVllmExtensions(f, limits, g);
}

std::optional<ApiError> ReadPrompt(const json* p, std::vector<PromptInput>& out) {
  if (!p) return BadRequest("'prompt' is required", "prompt");
  auto ids_of = [](const json& list, std::vector<int32_t>& ids) -> bool {
    for (const json& t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        return false;
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return true;
  };
  const char* kShape = "a string, a list of strings, a list of token ids or a list of token id lists";
  if (p->is_string()) {
    out.push_back({p->get<std::string>(), {}});
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    PromptInput in;
    if (!ids_of(*p, in.ids))
      return InvalidType(fmt::format("Invalid 'prompt': expected {}", kShape), "prompt");
    out.push_back(std::move(in));
  } else if (p->is_array() && !p->empty()) {
    for (const json& e : *p) {
      PromptInput in;
      if (e.is_string()) {
        in.text = e.get<std::string>();
      } else if (!e.is_array() || !ids_of(e, in.ids)) {
        return InvalidType(fmt::format("Invalid 'prompt': expected {}", kShape), "prompt");
      } else if (in.ids.empty()) {
        return BadRequest("'prompt' has an empty token id list", "prompt");
      }
      out.push_back(std::move(in));
    }
  } else if (p->is_array()) {
    return BadRequest("'prompt' must not be an empty list", "prompt");
  } else {
    return InvalidType(
        fmt::format("Invalid type for 'prompt': expected {}, but got {} instead.", kShape, TypeName(*p)),
        "prompt");
  }
  return std::nullopt;
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts (joined by "\n").
std::optional<ApiError> FlattenContent(json& m, size_t i) {
  const std::string param = fmt::format("messages[{}].content", i);
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    if (m["role"] == "assistant") {
      m["content"] = "";
      return std::nullopt;
    }
    return BadRequest(fmt::format("'{}' is required", param), param);
  }
  if (it->is_string()) return std::nullopt;
  if (!it->is_array())
    return InvalidType(
        fmt::format(
            "Invalid type for '{}': expected a string or a list of content parts, but got {} instead.", param,
            TypeName(*it)),
        param);
  std::string text;  // parts joined with "\n", as vLLM joins them
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return BadRequest(
          fmt::format("'{}': only text content parts ({{\"type\": \"text\", \"text\": ...}}) are supported",
                      param),
          param);
    if (&part != &it->front()) text += '\n';
    text += part["text"].get<std::string>();
  }
  m["content"] = text;
  return std::nullopt;
}

}  // namespace

Parsed<json> ParseJsonObject(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadRequest("The request body is not valid JSON.");
  if (!j.is_object()) return BadRequest("The request body must be a JSON object.");
  return j;
}

Parsed<CompletionRequest> ParseCompletionRequest(std::string_view body, const SchemaLimits& limits) {
  Parsed<json> j = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&j)) return *e;
  const json& obj = std::get<json>(j);
  CompletionRequest r;
  Fields f(obj);
  ReadGeneration(f, limits, r.gen, /*min_max_tokens=*/0);
  if (!f.Has("max_tokens")) r.gen.options.max_tokens = 16;  // OpenAI's and vLLM's completions default
  // lm-evaluation-harness scores a text with max_tokens 0, echo and logprobs: nothing is generated.
  r.gen.prompt_only = f.Has("max_tokens") && r.gen.options.max_tokens == 0;
  f.Integer("logprobs", 0, limits.max_logprobs, r.gen.options.logprobs);
  f.Integer("best_of", 1, limits.max_n, r.gen.best_of);
  f.Bool("echo", r.echo);
  if (f.Has("suffix") && !f.error) f.Fail(BadRequest("'suffix' is not supported", "suffix"));
  if (f.error) return *f.error;
  if (auto e = ReadStructuredOutput(obj, /*chat=*/false, r.gen.constraint)) return *e;
  if (auto e = ReadBeamSearch(f, obj, r.gen)) return *e;
  if (r.gen.use_beam_search && r.gen.prompt_only)
    return BadRequest("'use_beam_search' needs new tokens; 'max_tokens' is 0", "max_tokens");
  if (r.gen.prompt_only && (r.gen.best_of > 1 || r.gen.options.n > 1))
    return BadRequest("'n' and 'best_of' above 1 need new tokens; 'max_tokens' is 0",
                      r.gen.best_of > 1 ? "best_of" : "n");
  if (r.gen.best_of > 0 && r.gen.best_of < r.gen.options.n)
    return BadRequest(fmt::format("'best_of' ({}) must be at least 'n' ({})", r.gen.best_of, r.gen.options.n),
                      "best_of");
  if (r.gen.best_of > r.gen.options.n && r.gen.stream)
    return BadRequest("'best_of' > 'n' cannot be streamed (the best are known only at the end)", "best_of");
  if (auto e = ReadPrompt(f.Get("prompt"), r.prompts)) return *e;
  if (auto e = f.RejectUnread({kStructuredOutputFields, kToolRequestFields, kInformationalFields})) return *e;
  return r;
}

Parsed<ChatCompletionRequest> ParseChatCompletionRequest(std::string_view body, const SchemaLimits& limits) {
  Parsed<json> j = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&j)) return *e;
  const json& obj = std::get<json>(j);
  ChatCompletionRequest r;
  Fields f(obj);
  ReadGeneration(f, limits, r.gen);
  f.Integer("max_completion_tokens", 1, int64_t{1} << 30, r.gen.options.max_tokens);  // replaces max_tokens
  f.Bool("logprobs", r.logprobs);
  int32_t top = -1;
  f.Integer("top_logprobs", 0, limits.max_logprobs, top);
  f.Bool("add_generation_prompt", r.add_generation_prompt);
  if (f.error) return *f.error;
  if (auto e = ReadStructuredOutput(obj, /*chat=*/true, r.gen.constraint)) return *e;
  if (auto e = ReadToolRequest(obj, r.tools, r.template_kwargs)) return *e;
  if (r.tools.forced() && r.gen.constraint)
    return BadRequest(
        "tool_choice required or a named function constrains the output already; drop the "
        "response_format / guided field or use tool_choice auto",
        "tool_choice");
  if (auto e = ReadBeamSearch(f, obj, r.gen)) return *e;
  if (r.gen.prompt_logprobs >= 0 && r.gen.stream)
    return BadRequest("'prompt_logprobs' is not supported with 'stream' on chat completions",
                      "prompt_logprobs");
  if (top >= 0 && !r.logprobs)
    return BadRequest("'top_logprobs' needs 'logprobs' to be true", "top_logprobs");
  if (r.logprobs) r.gen.options.logprobs = std::max(top, 0);

  const json* msgs = f.Get("messages");
  if (!msgs) return BadRequest("'messages' is required", "messages");
  if (!msgs->is_array())
    return InvalidType(
        fmt::format("Invalid type for 'messages': expected an array, but got {} instead.", TypeName(*msgs)),
        "messages");
  if (msgs->empty()) return BadRequest("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    json m = (*msgs)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object())
      return InvalidType(
          fmt::format("Invalid type for '{}': expected an object, but got {} instead.", param, TypeName(m)),
          param);
    if (!m.contains("role") || !m["role"].is_string())
      return BadRequest(fmt::format("'{}.role' is required (a string)", param), param + ".role");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer" && role != "tool")
      return BadRequest(
          fmt::format("'{}.role' is '{}'; expected system, developer, user, assistant or tool", param, role),
          param + ".role");
    if (auto e = FlattenContent(m, i)) return *e;
    if (auto e = ReadToolMessage(m, i)) return *e;
    r.messages.push_back(std::move(m));
  }
  if (auto e = f.RejectUnread({kStructuredOutputFields, kToolRequestFields, kInformationalFields})) return *e;
  return r;
}

}  // namespace ferry::server
