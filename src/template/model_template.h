// Model chat templates: where a model keeps its Jinja template (GGUF `tokenizer.chat_template`,
// tokenizer_config.json `chat_template`) and its BOS/EOS token texts.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "core/metadata.h"

namespace ferry {

struct ModelChatTemplate {
  std::string source;                    // the Jinja2 template text
  std::optional<std::string> bos_token;  // token texts, when the model names them
  std::optional<std::string> eos_token;
};

// From a tokenizer_config.json's text: `chat_template` as a string, or a list of
// {"name", "template"} entries (the one named "default" is used); bos/eos as "<s>" or
// {"content": "<s>"}. NotFound when the file has no chat template. `origin` names the file in errors.
StatusOr<ModelChatTemplate> ChatTemplateFromTokenizerConfig(const std::string& json_text, const std::string& origin);

// From model metadata: `tokenizer.chat_template`, with BOS/EOS texts looked up through
// `tokenizer.ggml.{bos,eos}_token_id` in `tokenizer.ggml.tokens`. NotFound when absent.
StatusOr<ModelChatTemplate> ChatTemplateFromMetadata(const Metadata& metadata);

// For `ferry template -m PATH`: the metadata's template, else tokenizer_config.json beside
// the model (PATH itself when a folder, else its directory). Missing BOS/EOS texts are filled
// from whichever source has them.
StatusOr<ModelChatTemplate> FindModelChatTemplate(const Metadata& metadata, const std::string& model_path);

}  // namespace ferry
