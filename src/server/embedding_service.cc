#include "server/embedding_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <optional>

namespace ferry::server {
namespace {

using json = nlohmann::ordered_json;

// One input: text, or token ids.
struct EmbeddingInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};

std::optional<ApiError> TokenIds(const json& list, std::vector<int32_t>& ids) {
  for (const json& t : list) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
      return InvalidType("'input' token ids must be non-negative integers", "input");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

// `input`: a string, a list of strings, a list of token ids or a list of token-id lists.
std::variant<std::vector<EmbeddingInput>, ApiError> ParseInput(const json& in) {
  std::vector<EmbeddingInput> out;
  const ApiError type = InvalidType(
      "'input' must be a string, a list of strings, a list of token ids or a list of token-id lists",
      "input");
  if (in.is_string()) {
    out.push_back({in.get<std::string>(), {}});
  } else if (!in.is_array() || in.empty()) {
    return in.is_array() ? BadRequest("'input' must not be empty", "input") : type;
  } else if (in[0].is_number_integer()) {
    out.emplace_back();
    if (auto e = TokenIds(in, out.back().ids)) return *e;
  } else {
    for (const json& item : in) {
      out.emplace_back();
      if (item.is_string()) {
        out.back().text = item.get<std::string>();
      } else if (item.is_array()) {
        if (auto e = TokenIds(item, out.back().ids)) return *e;
      } else {
        return type;
      }
    }
  }
  for (const EmbeddingInput& e : out)
    if ((e.text && e.text->empty()) || (!e.text && e.ids.empty()))
      return BadRequest("'input' must not hold an empty string or an empty token list", "input");
  return out;
}

}  // namespace

std::string EncodeFloatsBase64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(v.size() * 4);  // [4 * v.size()] little-endian float32
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b)
      bytes[4 * i + static_cast<size_t>(b)] = static_cast<unsigned char>(u >> (8 * b));
  }
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = uint32_t{bytes[i]} << 16;
    if (n > 1) w |= uint32_t{bytes[i + 1]} << 8;
    if (n > 2) w |= bytes[i + 2];
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(w >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

Reply EmbeddingService::Embeddings(std::string_view body) {
  Parsed<json> parsed = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Reply::Error(*e);
  const json& j = std::get<json>(parsed);
  // Every field is either honoured or refused (never silently ignored).
  for (const auto& [key, value] : j.items())
    if (key != "input" && key != "model" && key != "encoding_format" && key != "dimensions" && key != "user")
      return Reply::Error(BadRequest(fmt::format("'{}' is not supported by /v1/embeddings", key), key));
  if (j.contains("model")) {
    if (!j["model"].is_string()) return Reply::Error(InvalidType("'model' must be a string", "model"));
    const std::string model = j["model"].get<std::string>();
    if (!model.empty() && model != ctx_.model_name)
      return Reply::Error(ApiError{
          404, fmt::format("The model `{}` does not exist. This server serves `{}`.", model, ctx_.model_name),
          "model", "model_not_found"});
  }
  if (j.contains("user") && !j["user"].is_string())  // OpenAI's end-user id: no effect here
    return Reply::Error(InvalidType("'user' must be a string", "user"));
  bool base64 = false;
  if (j.contains("encoding_format")) {
    const json& f = j["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      return Reply::Error(BadRequest("'encoding_format' must be \"float\" or \"base64\"", "encoding_format"));
    base64 = f == "base64";
  }
  if (j.contains("dimensions")) {
    const json& d = j["dimensions"];
    if (!d.is_number_integer())
      return Reply::Error(InvalidType("'dimensions' must be an integer", "dimensions"));
    // Shortened (Matryoshka) embeddings would need a model trained for them.
    if (d.get<int64_t>() != ctx_.dim)
      return Reply::Error(BadRequest(
          fmt::format("'dimensions' {} is not supported: this model's embeddings have {} dimensions",
                      d.get<int64_t>(), ctx_.dim),
          "dimensions"));
  }
  if (!j.contains("input")) return Reply::Error(BadRequest("'input' is required", "input"));
  auto inputs = ParseInput(j["input"]);
  if (auto* e = std::get_if<ApiError>(&inputs)) return Reply::Error(*e);

  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> options;
  int64_t prompt_tokens = 0;
  for (EmbeddingInput& in : std::get<std::vector<EmbeddingInput>>(inputs)) {
    if (in.text && !ctx_.tokenizer)
      return Reply::Error(
          BadRequest("text inputs need a tokenizer; this model has none: send token ids", "input"));
    std::vector<int32_t> ids = in.text ? ctx_.tokenizer->Encode(*in.text, true, true) : std::move(in.ids);
    for (int32_t id : ids)
      if (id >= ctx_.n_vocab)
        return Reply::Error(BadRequest(
            fmt::format("'input' holds token id {}, outside the vocabulary [0, {})", id, ctx_.n_vocab),
            "input"));
    const int64_t len = static_cast<int64_t>(ids.size());
    if (len > ctx_.max_model_len)
      return Reply::Error(BadRequest(
          fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens in "
                      "the input. Please reduce the length of the input.",
                      ctx_.max_model_len, len),
          "input", "context_length_exceeded"));
    prompt_tokens += len;
    RequestOptions o;
    o.pooling = ctx_.pooling;
    o.max_tokens = 0;
    prompts.push_back(std::move(ids));
    options.push_back(o);
  }
  auto submitted = ctx_.engine->Submit(prompts, options);
  if (auto* e = std::get_if<ApiError>(&submitted)) return Reply::Error(*e);
  std::shared_ptr<OutputChannel> channel = std::get<std::shared_ptr<OutputChannel>>(submitted);
  std::vector<std::vector<float>> vectors(prompts.size());
  while (!channel->Done()) {
    std::vector<RequestOutput> outs = channel->Wait(std::chrono::milliseconds(200));
    if (outs.empty())
      if (Status st = ctx_.engine->EngineStatus(); !st.ok()) {
        ctx_.engine->Abort(*channel);
        return Reply::Error({500, "The engine failed while embedding: " + st.ToString()});
      }
    for (RequestOutput& o : outs) {
      if (!o.finished) continue;
      if (o.finish_reason != "stop") {
        ctx_.engine->Abort(*channel);
        return Reply::Error({500, "The embedding request was aborted (the server is shutting down)."});
      }
      const auto& ids = channel->ids();
      vectors[static_cast<size_t>(std::find(ids.begin(), ids.end(), o.id) - ids.begin())] =
          std::move(o.embedding);
    }
  }
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    item["embedding"] = base64 ? json(EncodeFloatsBase64(vectors[i])) : json(vectors[i]);
    data.push_back(std::move(item));
  }
  json reply = {{"object", "list"},
                {"data", std::move(data)},
                {"model", ctx_.model_name},
                {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return Reply{200, Dump(reply), nullptr, 0};
}

}  // namespace ferry::server
