// `ferry bench`: model speed by default (`ferry bench -m PATH ...`), with nested benchmarks
// (`ferry bench throughput ...`, later `ferry bench serve ...`), each in its own file.
#include <utility>
#include <vector>

#include "commands.h"

namespace ferry::cli {

Runner AddBenchAttentionCommand(CLI::App& bench);  // cmd_bench_attention.cc
Runner AddBenchGrammarCommand(CLI::App& bench);    // cmd_bench_grammar.cc

Runner AddBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks: model speed (default), throughput");
  bench->require_subcommand(0, 1);
  std::vector<std::pair<CLI::App*, Runner>> nested;
  for (auto add : {&AddBenchThroughputCommand, &AddBenchServeCommand, &AddBenchAttentionCommand, &AddBenchGrammarCommand}) {
    size_t before = bench->get_subcommands({}).size();
    Runner r = add(*bench);
    nested.emplace_back(bench->get_subcommands({})[before], std::move(r));
  }
  Runner model = AddBenchModelOptions(*bench);
  return [nested, model]() -> int {
    for (const auto& [cmd, run] : nested)
      if (cmd->parsed()) return run();
    return model();
  };
}

}  // namespace ferry::cli
