// `ferry template`: renders a chat template (a model's or a .jinja file) over a conversation,
// printing exactly the prompt transformers' apply_chat_template would produce.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/loaded_model.h"
#include "template/chat_template.h"
#include "template/model_template.h"

namespace ferry::cli {
namespace {

StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Runner AddTemplateCommand(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, template_file, messages_file, bos, eos;
    bool no_generation_prompt = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("template", "render a chat template over a conversation (as transformers does)");
  auto* m = cmd->add_option("-m,--model", o->model, "model whose chat template to use: GGUF file or Hugging Face folder");
  auto* t = cmd->add_option("--template", o->template_file, "a Jinja2 chat template file");
  m->excludes(t);
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file for -m (as for `ferry run`)");
  cmd->add_option("--messages", o->messages_file,
                  "JSON file: a list of messages, or an object {\"messages\": [...], other variables (tools, ...)}")
      ->required();
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt, "add_generation_prompt=false");
  auto* bos = cmd->add_option("--bos-token", o->bos, "bos_token text (default: the model's, else empty)");
  auto* eos = cmd->add_option("--eos-token", o->eos, "eos_token text (default: the model's, else empty)");

  return [o, bos, eos]() -> int {
    if (o->model.empty() && o->template_file.empty()) return Fail(InvalidArgumentError("template: give -m MODEL or --template FILE"));
    ModelChatTemplate mt;
    if (!o->template_file.empty()) {
      auto src = ReadText(o->template_file);
      if (!src.ok()) return Fail(src.status());
      mt.source = std::move(*src);
    } else {
      auto source = OpenWithTokenizer(o->model, LoadOptions{o->tokenizer});
      if (!source.ok()) return Fail(source.status());
      auto found = FindModelChatTemplate((*source)->metadata(), o->model);
      if (!found.ok()) return Fail(found.status());
      mt = std::move(*found);
    }
    auto text = ReadText(o->messages_file);
    if (!text.ok()) return Fail(text.status());
    auto json = nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return Fail(InvalidArgumentError("{}: not valid JSON", o->messages_file));
    ChatRequest req;
    if (json.is_array()) {
      req.messages = json;
    } else if (json.is_object() && json.contains("messages")) {
      for (const auto& [k, v] : json.items()) {
        if (k == "messages") req.messages = v;
        else if (k == "add_generation_prompt" && v.is_boolean()) req.add_generation_prompt = v.get<bool>();
        else req.extra[k] = v;
      }
    } else {
      return Fail(InvalidArgumentError("{}: expected a list of messages or an object with \"messages\"", o->messages_file));
    }
    if (o->no_generation_prompt) req.add_generation_prompt = false;
    req.bos_token = bos->count() ? o->bos : mt.bos_token.value_or("");
    req.eos_token = eos->count() ? o->eos : mt.eos_token.value_or("");
    auto tmpl = ChatTemplate::Parse(mt.source);
    if (!tmpl.ok()) return Fail(tmpl.status());
    auto out = tmpl->Render(req);
    if (!out.ok()) return Fail(out.status());
    std::fwrite(out->data(), 1, out->size(), stdout);
    std::fflush(stdout);
    return 0;
  };
}

}  // namespace ferry::cli
