// `ferry bench -m PATH`: placeholder until the kernels work lands (owned by the kernels issue).
#include "commands.h"

namespace ferry::cli {

Runner AddBenchModelOptions(CLI::App& bench) {
  return []() -> int { return Fail(UnsupportedError("ferry bench -m is not implemented yet")); };
}

}  // namespace ferry::cli
