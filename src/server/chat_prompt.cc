#include "server/chat_prompt.h"

#include <cctype>

#include "base/log.h"

namespace ferry::server {
namespace {

// Whether the template writes `... + X['function']['arguments']` not followed by a filter
// (`| tojson`): it wants the arguments as a string, and fails on the object Ferry passes.
bool ConcatenatesArguments(std::string_view src) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::string_view use : {"['function']['arguments']", ".function.arguments"})
    for (size_t at = src.find(use); at != std::string_view::npos; at = src.find(use, at + 1)) {
      size_t b = at, e = at + use.size();
      while (b > 0 && ident(src[b - 1])) --b;  // the variable holding the call
      while (b > 0 && src[b - 1] == ' ') --b;
      while (e < src.size() && src[e] == ' ') ++e;
      if (b > 0 && src[b - 1] == '+' && (e >= src.size() || src[e] != '|')) return true;
    }
  return false;
}

// History calls' arguments back to JSON text, for templates that concatenate them.
nlohmann::ordered_json WithStringArguments(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out)
    if (m.contains("tool_calls") && m["tool_calls"].is_array())
      for (auto& c : m["tool_calls"])
        if (c.contains("function") && c["function"].contains("arguments") &&
            !c["function"]["arguments"].is_string())
          c["function"]["arguments"] = c["function"]["arguments"].dump();
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(std::optional<ModelChatTemplate> model_template) {
  std::unique_ptr<ChatPrompt> p(new ChatPrompt());
  if (model_template) {
    StatusOr<ChatTemplate> t = ChatTemplate::Parse(model_template->source);
    if (!t.ok()) return InvalidArgumentError("the chat template does not parse: {}", t.status().ToString());
    p->tmpl_ = std::move(*t);
    p->bos_ = model_template->bos_token.value_or("");
    p->eos_ = model_template->eos_token.value_or("");
    const std::string& src = model_template->source;
    p->template_has_developer_ = src.find("developer") != std::string::npos;
    p->template_has_tools_ = src.find("tools") != std::string::npos;
    p->template_string_arguments_ = ConcatenatesArguments(src);
    p->tool_format_ = tool_calls::DetectToolFormat(src);
    p->thinks_ = src.find("</think>") != std::string::npos;
  }
  return p;
}

namespace {

// The system-message text that tells a model whose template ignores `tools` what it may call
// and how (the format its parser reads).
std::string ToolsPreamble(const nlohmann::ordered_json& tools, tool_calls::ToolFormat f) {
  std::string out = "You can call these tools (JSON Schema function signatures):\n";
  for (const auto& t : tools) out += t.dump() + "\n";
  switch (f) {
    case tool_calls::ToolFormat::kHermes:
      out +=
          "To call one, answer with <tool_call>\n{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}\n"
          "</tool_call>";
      break;
    case tool_calls::ToolFormat::kLlama3:
      out += "To call one, answer with {\"name\": <function-name>, \"parameters\": <args-json-object>}";
      break;
    case tool_calls::ToolFormat::kMistralV3:
      out +=
          "To call tools, answer with [TOOL_CALLS][{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}]";
      break;
    case tool_calls::ToolFormat::kMistralV11:
      out += "To call one, answer with [TOOL_CALLS]<function-name>[ARGS]<args-json-object>";
      break;
    case tool_calls::ToolFormat::kGeneric:
      out +=
          "To call tools, answer with {\"tool_calls\": [{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}]}";
      break;
    case tool_calls::ToolFormat::kQwen3Coder:
      out +=
          "To call one, answer with <tool_call>\n<function=<function-name>>\n<parameter=<name>>\n<value>\n"
          "</parameter>\n</function>\n</tool_call>";
      break;
    case tool_calls::ToolFormat::kHarmony:
      out +=
          "To call one, answer with <|channel|>commentary to=functions.<function-name> <|constrain|>json"
          "<|message|><args-json-object><|call|>";
      break;
    case tool_calls::ToolFormat::kDeepSeekR1:
      out +=
          "To call tools, answer with <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
          "<function-name>\n```json\n<args-json-object>\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
      break;
    case tool_calls::ToolFormat::kDeepSeekV31:
      out +=
          "To call tools, answer with "
          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><function-name><｜tool▁sep｜>"
          "<args-json-object><｜tool▁call▁end｜><｜tool▁calls▁end｜>";
      break;
    case tool_calls::ToolFormat::kFunctionaryV31:
      out += "To call one, answer with <function=<function-name>><args-json-object></function>";
      break;
    case tool_calls::ToolFormat::kFunctionaryV32:
      out += "To call one, answer with <function-name>\n<args-json-object>";
      break;
    case tool_calls::ToolFormat::kCommandR7B:
      out +=
          "To call tools, answer with <|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": "
          "<function-name>, "
          "\"parameters\": <args-json-object>}]<|END_ACTION|>";
      break;
    case tool_calls::ToolFormat::kGranite:
      out +=
          "To call tools, answer with <|tool_call|>[{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}]";
      break;
    case tool_calls::ToolFormat::kDeepSeekV32:
      out +=
          "To call tools, answer with <｜DSML｜function_calls>\n<｜DSML｜invoke name=\"<function-name>\">\n"
          "<｜DSML｜parameter name=\"<name>\" string=\"true|false\"><value></｜DSML｜parameter>\n"
          "</｜DSML｜invoke>\n</｜DSML｜function_calls>";
      break;
  }
  return out;
}

// Prepends the preamble to the first system message (or adds one).
nlohmann::ordered_json WithToolsPreamble(const nlohmann::ordered_json& messages,
                                         const std::string& preamble) {
  nlohmann::ordered_json out = messages;
  if (!out.empty() && out[0]["role"] == "system" && out[0]["content"].is_string()) {
    std::string system = out[0]["content"].get<std::string>();
    system.append("\n\n").append(preamble);
    out[0]["content"] = std::move(system);
  } else {
    out.insert(out.begin(), nlohmann::ordered_json{{"role", "system"}, {"content", preamble}});
  }
  return out;
}

// ChatML has no tool syntax: an assistant's calls are written in Hermes form after its text.
std::string ChatMlContent(const nlohmann::ordered_json& m) {
  std::string text = m["content"].is_string() ? m["content"].get<std::string>() : std::string();
  if (m.contains("tool_calls") && m["tool_calls"].is_array())
    for (const auto& c : m["tool_calls"]) {
      nlohmann::ordered_json call = {{"name", c["function"]["name"]},
                                     {"arguments", c["function"]["arguments"]}};
      if (!text.empty()) text.append("\n");
      text.append("<tool_call>\n").append(call.dump()).append("\n</tool_call>");
    }
  return text;
}

}  // namespace

StatusOr<RenderedChat> ChatPrompt::Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                          const nlohmann::ordered_json& tools,
                                          const nlohmann::ordered_json& kwargs) const {
  if (template_string_arguments_) {
    const nlohmann::ordered_json mapped = WithStringArguments(messages);
    return RenderRoles(mapped, add_generation_prompt, tools, kwargs);
  }
  return RenderRoles(messages, add_generation_prompt, tools, kwargs);
}

StatusOr<RenderedChat> ChatPrompt::RenderRoles(const nlohmann::ordered_json& messages,
                                               bool add_generation_prompt,
                                               const nlohmann::ordered_json& tools,
                                               const nlohmann::ordered_json& kwargs) const {
  if (!template_has_developer_) {
    nlohmann::ordered_json mapped = messages;
    for (auto& m : mapped)
      if (m["role"] == "developer") m["role"] = "system";
    return RenderMapped(mapped, add_generation_prompt, tools, kwargs);
  }
  return RenderMapped(messages, add_generation_prompt, tools, kwargs);
}

StatusOr<RenderedChat> ChatPrompt::RenderMapped(const nlohmann::ordered_json& messages_in,
                                                bool add_generation_prompt,
                                                const nlohmann::ordered_json& tools,
                                                const nlohmann::ordered_json& kwargs) const {
  RenderedChat out;
  const bool has_tools = tools.is_array() && !tools.empty();
  const nlohmann::ordered_json& messages =
      has_tools && !(tmpl_ && template_has_tools_)
          ? WithToolsPreamble(messages_in, ToolsPreamble(tools, tool_format_))
          : messages_in;
  if (tmpl_) {
    ChatRequest req;
    req.messages = messages;
    req.add_generation_prompt = add_generation_prompt;
    req.bos_token = bos_;
    req.eos_token = eos_;
    if (kwargs.is_object()) req.extra = kwargs;
    if (has_tools) req.extra["tools"] = tools;
    FERRY_ASSIGN_OR_RETURN(out.text, tmpl_->Render(req));
    return out;  // the template writes bos_token itself where the model wants it
  }
  if (!warned_.exchange(true))
    Log(LogLevel::kWarn,
        "the model has no chat template; chat completions use ChatML (<|im_start|>role ... <|im_end|>)");
  for (const auto& m : messages)
    out.text += "<|im_start|>" + m["role"].get<std::string>() + "\n" + ChatMlContent(m) + "<|im_end|>\n";
  if (add_generation_prompt) out.text += "<|im_start|>assistant\n";
  out.add_bos = true;
  return out;
}

}  // namespace ferry::server
