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
  StatusOr<RenderedChat> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;
  bool has_model_template() const { return tmpl_.has_value(); }

 private:
  ChatPrompt() = default;
  StatusOr<RenderedChat> RenderMapped(const nlohmann::ordered_json& messages,
                                      bool add_generation_prompt) const;
  std::optional<ChatTemplate> tmpl_;
  std::string bos_, eos_;
  bool template_has_developer_ = false;  // the template's source names the `developer` role
  mutable std::atomic<bool> warned_{false};
};

}  // namespace ferry::server
