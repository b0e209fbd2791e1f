// ChatTemplate: a parsed Jinja2 chat template rendered the way Hugging Face transformers'
// apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks, loopcontrols, tojson without
// ASCII escaping, raise_exception, strftime_now), byte for byte.
#pragma once

#include <nlohmann/json.hpp>

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "template/interpreter.h"

namespace ferry {

struct ChatRenderOptions {
  // The time strftime_now() formats (local time); unset: the current local time.
  std::optional<std::tm> now;
  tmpl::RenderLimits limits;
};

// The usual inputs of apply_chat_template; `extra` (a JSON object: tools, documents,
// enable_thinking, ...) is merged into the context after the fixed fields.
struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // Errors: InvalidArgument "TemplateSyntaxError: ... (line N)"; Unsupported naming the construct.
  static StatusOr<ChatTemplate> Parse(const std::string& source);

  // Renders with `context` (a JSON object) as the template's variables. A template error
  // becomes InvalidArgument with Python's exception name, e.g. "TemplateError: <message>"
  // for raise_exception; limits give ResourceExhausted; unsupported constructs Unsupported.
  StatusOr<std::string> Render(const nlohmann::ordered_json& context, const ChatRenderOptions& options = {}) const;
  StatusOr<std::string> Render(const ChatRequest& request, const ChatRenderOptions& options = {}) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ferry
