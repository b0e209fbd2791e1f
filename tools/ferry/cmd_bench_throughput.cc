// `ferry bench throughput`: placeholder until the serving engine lands (owned by the engine issue).
#include "commands.h"

namespace ferry::cli {

Runner AddBenchThroughputCommand(CLI::App& bench) {
  bench.add_subcommand("throughput", "offline serving throughput (not implemented yet)");
  return []() -> int { return Fail(UnsupportedError("ferry bench throughput is not implemented yet")); };
}

}  // namespace ferry::cli
