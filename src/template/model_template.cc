// Model chat templates: metadata key, tokenizer_config.json (string or named list) and token texts.
#include "template/model_template.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ferry {
namespace {

std::optional<std::string> TokenText(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return std::nullopt;
}

std::optional<std::string> TokenById(const Metadata& md, const char* key) {
  auto id = md.GetInt(key);
  const MetaValue* tokens = md.Find("tokenizer.ggml.tokens");
  if (!id || !tokens || tokens->type != MetaValue::Type::kArray || *id < 0 || static_cast<size_t>(*id) >= tokens->arr.size())
    return std::nullopt;
  const MetaValue& t = tokens->arr[static_cast<size_t>(*id)];
  if (t.type != MetaValue::Type::kString) return std::nullopt;
  return t.s;
}

}  // namespace

StatusOr<ModelChatTemplate> ChatTemplateFromTokenizerConfig(const std::string& json_text, const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return CorruptFileError("{}: not a JSON object", origin);
  ModelChatTemplate out;
  if (j.contains("bos_token")) out.bos_token = TokenText(j["bos_token"]);
  if (j.contains("eos_token")) out.eos_token = TokenText(j["eos_token"]);
  if (!j.contains("chat_template") || j["chat_template"].is_null()) return NotFoundError("{}: no chat_template", origin);
  const nlohmann::json& ct = j["chat_template"];
  if (ct.is_string()) {
    out.source = ct.get<std::string>();
    return out;
  }
  if (ct.is_array()) {
    for (const auto& entry : ct) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
      if (entry["name"] == "default" && entry["template"].is_string()) {
        out.source = entry["template"].get<std::string>();
        return out;
      }
    }
    return NotFoundError("{}: chat_template list has no entry named \"default\"", origin);
  }
  return CorruptFileError("{}: chat_template must be a string or a list of {{name, template}}", origin);
}

StatusOr<ModelChatTemplate> ChatTemplateFromMetadata(const Metadata& metadata) {
  auto src = metadata.GetString("tokenizer.chat_template");
  if (!src) return NotFoundError("model metadata has no tokenizer.chat_template");
  ModelChatTemplate out;
  out.source = *src;
  out.bos_token = TokenById(metadata, "tokenizer.ggml.bos_token_id");
  out.eos_token = TokenById(metadata, "tokenizer.ggml.eos_token_id");
  return out;
}

StatusOr<ModelChatTemplate> FindModelChatTemplate(const Metadata& metadata, const std::string& model_path) {
  auto from_md = ChatTemplateFromMetadata(metadata);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
  fs::path cfg = dir / "tokenizer_config.json";
  std::optional<StatusOr<ModelChatTemplate>> from_cfg;
  if (fs::exists(cfg, ec)) {
    std::ifstream in(cfg, std::ios::binary);
    if (!in) return IoError("{}: cannot open", cfg.string());
    std::stringstream ss;
    ss << in.rdbuf();
    from_cfg = ChatTemplateFromTokenizerConfig(ss.str(), cfg.string());
    if (!from_cfg->ok() && from_cfg->status().code() != StatusCode::kNotFound && !from_md.ok()) return from_cfg->status();
  }
  if (from_md.ok()) {
    ModelChatTemplate out = *from_md;
    if (from_cfg && from_cfg->ok()) {
      if (!out.bos_token) out.bos_token = (*from_cfg)->bos_token;
      if (!out.eos_token) out.eos_token = (*from_cfg)->eos_token;
    }
    return out;
  }
  if (from_cfg && from_cfg->ok()) {
    ModelChatTemplate out = **from_cfg;
    if (!out.bos_token) out.bos_token = TokenById(metadata, "tokenizer.ggml.bos_token_id");
    if (!out.eos_token) out.eos_token = TokenById(metadata, "tokenizer.ggml.eos_token_id");
    return out;
  }
  return NotFoundError("{}: no chat template (no tokenizer.chat_template in the metadata and no chat_template in {})",
                       model_path, cfg.string());
}

}  // namespace ferry
