// `ferry tokenize`: text -> token ids, as llama-tokenize prints them.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "engine/loaded_model.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

namespace ferry::cli {

Runner AddTokenizeCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    std::string prompt;
    bool ids = false, pieces = false, no_bos = false, no_parse_special = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("tokenize", "tokenize text with a model's vocabulary");
  o->model.Add(cmd, /*with_threads=*/false);
  cmd->add_option("-p,--prompt", o->prompt, "text to tokenize")->required();
  cmd->add_flag("--ids", o->ids, "print only the ids, as one JSON list");
  cmd->add_flag("--pieces", o->pieces, "print only the pieces, as one JSON list");
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS/EOS");
  cmd->add_flag("--no-parse-special", o->no_parse_special, "treat special-token text as plain text");

  return [o]() -> int {
    auto src = OpenWithTokenizer(o->model.model, LoadOptions{o->model.tokenizer});
    if (!src.ok()) return Fail(src.status());
    auto tok = Tokenizer::FromMetadata((*src)->metadata());
    if (!tok.ok()) return Fail(tok.status());
    std::vector<int32_t> ids = tok->Encode(o->prompt, !o->no_bos, !o->no_parse_special);
    if (o->ids) {
      std::string out = "[";
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
      std::printf("%s]\n", out.c_str());
    } else if (o->pieces) {
      nlohmann::json j = nlohmann::json::array();
      for (int32_t id : ids) j.push_back(tok->TokenToPiece(id, true));
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tok->TokenToPiece(id, true).c_str());
    }
    return 0;
  };
}

}  // namespace ferry::cli
