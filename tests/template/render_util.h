// Test helper: render a template string with a JSON context, or get its error message.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "template/chat_template.h"

namespace ferry::testing {

inline std::string Render(const std::string& src, const char* context_json = "{}") {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto out = t->Render(nlohmann::ordered_json::parse(context_json));
  if (!out.ok()) return "ERROR: " + out.status().message();
  return *out;
}

inline Status RenderStatus(const std::string& src, const char* context_json = "{}", ChatRenderOptions options = {}) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return t.status();
  auto out = t->Render(nlohmann::ordered_json::parse(context_json), options);
  return out.ok() ? Status::Ok() : out.status();
}

}  // namespace ferry::testing
