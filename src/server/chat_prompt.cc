#include "server/chat_prompt.h"

#include "base/log.h"

namespace ferry::server {

StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(std::optional<ModelChatTemplate> model_template) {
  std::unique_ptr<ChatPrompt> p(new ChatPrompt());
  if (model_template) {
    StatusOr<ChatTemplate> t = ChatTemplate::Parse(model_template->source);
    if (!t.ok()) return InvalidArgumentError("the chat template does not parse: {}", t.status().ToString());
    p->tmpl_ = std::move(*t);
    p->bos_ = model_template->bos_token.value_or("");
    p->eos_ = model_template->eos_token.value_or("");
    p->template_has_developer_ = model_template->source.find("developer") != std::string::npos;
  }
  return p;
}

StatusOr<RenderedChat> ChatPrompt::Render(const nlohmann::ordered_json& messages,
                                          bool add_generation_prompt) const {
  if (!template_has_developer_) {
    nlohmann::ordered_json mapped = messages;
    for (auto& m : mapped)
      if (m["role"] == "developer") m["role"] = "system";
    return RenderMapped(mapped, add_generation_prompt);
  }
  return RenderMapped(messages, add_generation_prompt);
}

StatusOr<RenderedChat> ChatPrompt::RenderMapped(const nlohmann::ordered_json& messages,
                                                bool add_generation_prompt) const {
  RenderedChat out;
  if (tmpl_) {
    ChatRequest req;
    req.messages = messages;
    req.add_generation_prompt = add_generation_prompt;
    req.bos_token = bos_;
    req.eos_token = eos_;
    FERRY_ASSIGN_OR_RETURN(out.text, tmpl_->Render(req));
    return out;  // the template writes bos_token itself where the model wants it
  }
  if (!warned_.exchange(true))
    Log(LogLevel::kWarn,
        "the model has no chat template; chat completions use ChatML (<|im_start|>role ... <|im_end|>)");
  for (const auto& m : messages)
    out.text += "<|im_start|>" + m["role"].get<std::string>() + "\n" + m["content"].get<std::string>() +
                "<|im_end|>\n";
  if (add_generation_prompt) out.text += "<|im_start|>assistant\n";
  out.add_bos = true;
  return out;
}

}  // namespace ferry::server
