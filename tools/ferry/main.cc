// ferry: command-line entry point. One file per subcommand; this file only dispatches.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "commands.h"
#include "kernels/kernels.h"

namespace ferry::cli {

int Fail(const Status& status) {
  std::fprintf(stderr, "ferry: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

void ModelFlags::Add(CLI::App* cmd, bool with_threads, bool default_model) {
  CLI::Option* m = cmd->add_option("-m,--model", model,
                                   default_model ? "model: GGUF file, Hugging Face folder or llama2.c .bin "
                                                   "(default: the bundled stories260K)"
                                                 : "model: GGUF file, Hugging Face folder or llama2.c .bin");
  if (!default_model) m->required();
  cmd->add_option("--tokenizer", tokenizer,
                  "tokenizer file (tokenizer.json, tokenizer.model or llama2.c .bin)");
  if (with_threads) {
    cmd->add_option("-t,--threads", threads, "threads (default: physical cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--no-repack", no_repack,
                  "compute q4_0/q8_0 weights in place from the file (no repacked copy)");
    cmd->add_flag("--exact-gelu", exact_gelu,
                  "GeGLU models (gemma): the tanh GELU in f32, as transformers computes it, instead of "
                  "llama.cpp's fp16 GELU table");
    sparsity.Add(cmd);
    kv_cache.Add(cmd);
  }
}

std::string ModelFlags::ModelOrDefault() const {
  if (!model.empty()) return model;
  std::fprintf(stderr, "ferry: no -m given: using the bundled model %s (stories260K, MIT licence)\n",
               FERRY_BUNDLED_MODEL);
  return FERRY_BUNDLED_MODEL;
}

}  // namespace ferry::cli

int main(int argc, char** argv) {
  using namespace ferry::cli;
  CLI::App app{"ferry: fast LLM inference on the hardware you have"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log more");
  std::vector<std::pair<CLI::App*, Runner>> commands;
  auto add = [&](Runner (*fn)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    Runner r = fn(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(&AddRunCommand);
  add(&AddPplCommand);
  add(&AddTokenizeCommand);
  add(&AddTemplateCommand);
  add(&AddInfoCommand);
  add(&AddMakeModelCommand);
  add(&AddBenchCommand);
  add(&AddCalibrateCommand);
  add(&AddQuantizeCommand);
  add(&AddPruneCommand);
  add(&AddSparsifyCommand);
  add(&AddServeCommand);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (verbose) ferry::SetLogLevel(ferry::LogLevel::kDebug);
  if (const std::string isa_err = ferry::kernels::CheckIsaEnv(); !isa_err.empty()) {
    std::fprintf(stderr, "ferry: %s\n", isa_err.c_str());
    return 2;
  }
  for (auto& [cmd, run] : commands)
    if (cmd->parsed()) return run();
  return 2;
}
