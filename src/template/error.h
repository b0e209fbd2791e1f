// TemplateError: the exception the template layer throws internally (parse or render failure);
// the public API (chat_template.h) turns it into a Status, so nothing escapes the layer.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "base/status.h"

namespace ferry::tmpl {

class TemplateError : public std::runtime_error {
 public:
  // `type` is the Python exception name the goldens record ("TemplateError", "TypeError",
  // "UndefinedError", "TemplateSyntaxError", ...); the message is "<type>: <text>".
  TemplateError(std::string type, const std::string& text, StatusCode code = StatusCode::kInvalidArgument)
      : std::runtime_error(type + ": " + text), type_(std::move(type)), code_(code) {}
  const std::string& type() const { return type_; }
  StatusCode code() const { return code_; }

 private:
  std::string type_;
  StatusCode code_;
};

template <typename... Args>
[[noreturn]] void Raise(const char* type, fmt::format_string<Args...> f, Args&&... args) {
  throw TemplateError(type, fmt::format(f, std::forward<Args>(args)...));
}

// A construct this renderer does not implement: always an error naming it, never a guess.
template <typename... Args>
[[noreturn]] void RaiseUnsupported(fmt::format_string<Args...> f, Args&&... args) {
  throw TemplateError("Unsupported", fmt::format(f, std::forward<Args>(args)...), StatusCode::kUnsupported);
}

}  // namespace ferry::tmpl
