// libFuzzer target: parsing and rendering any template text must end in a string or a Status
// within the render limits, never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto t = ferry::ChatTemplate::Parse(source);
  if (!t.ok()) return 0;
  ferry::ChatRequest req;
  req.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "sys"}, {"role": "user", "content": "h\u00e9llo \ud83e\udd99"},
          {"role": "assistant", "content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1.5}}}]},
          {"role": "tool", "content": null}])");
  req.bos_token = "<s>";
  req.eos_token = "</s>";
  req.extra["tools"] = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
  ferry::ChatRenderOptions options;
  options.now = std::tm{};
  options.limits.max_steps = 200000;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_call_depth = 50;
  (void)t->Render(req, options);
  return 0;
}
