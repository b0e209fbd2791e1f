// ChatPrompt: turns chat messages into the prompt text the model was trained on, with the
// model's own Jinja chat template (rendered as transformers does), or ChatML when the model
// has none (warned about once).
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "template/chat_template.h"
#include "template/model_template.h"
#include "tool_calls/tool_format.h"

namespace ferry::server {

struct RenderedChat {
  std::string text;
  bool add_bos = false;  // encode with the tokenizer's BOS (the template text does not carry it)
};

class ChatPrompt {
 public:
  // `model_template` unset: the ChatML fallback. A template that does not parse is an error.
  static StatusOr<std::unique_ptr<ChatPrompt>> Create(std::optional<ModelChatTemplate> model_template);

  // messages: validated, with string contents. `developer` messages become `system` ones for
  // templates that never name the developer role (most do not, and drop roles they do not
  // know) and for ChatML, as vLLM and OpenAI's own mapping do. Template errors (raise_exception, ...) are
  // InvalidArgument with the template's message.
  // tools: the request's tools as sent (null: none), given to the template as `tools`; a
  // template that never reads `tools` (and ChatML) gets them described in the system message
  // instead, with the call format. kwargs (chat_template_kwargs) join the template's context.
  StatusOr<RenderedChat> Render(
      const nlohmann::ordered_json& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& tools = nullptr,
      const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;
  bool has_model_template() const { return tmpl_.has_value(); }
  // The wire format of the model's tool calls (ChatML: Hermes, its usual companion).
  tool_calls::ToolFormat tool_format() const { return tool_format_; }
  // The template writes <think> / </think> (a reasoning model: Qwen3, DeepSeek R1, QwQ, ...).
  bool thinks() const { return thinks_; }

 private:
  ChatPrompt() = default;
  StatusOr<RenderedChat> RenderRoles(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                     const nlohmann::ordered_json& tools,
                                     const nlohmann::ordered_json& kwargs) const;
  StatusOr<RenderedChat> RenderMapped(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                      const nlohmann::ordered_json& tools,
                                      const nlohmann::ordered_json& kwargs) const;
  std::optional<ChatTemplate> tmpl_;
  std::string bos_, eos_;
  bool template_has_developer_ = false;  // the template's source names the `developer` role
  bool template_has_tools_ = false;      // the template's source reads `tools`
  // The template concatenates a call's arguments as a string (DeepSeek R1, Functionary v3.2)
  // rather than writing them with tojson: history calls get their arguments as JSON text.
  bool template_string_arguments_ = false;
  tool_calls::ToolFormat tool_format_ = tool_calls::ToolFormat::kHermes;
  bool thinks_ = false;
  mutable std::atomic<bool> warned_{false};
};

}  // namespace ferry::server
