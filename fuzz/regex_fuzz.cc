// libFuzzer target: the regex compiler (plain, and as JSON string content with search), lowering
// and the matcher on arbitrary bytes. The first byte picks the options.
#include <cstddef>
#include <cstdint>

#include "constraint/regex_compiler.h"
#include "constraint_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ferry::constraint::RegexOptions o;
  o.json_string = data[0] & 1;
  o.search = data[0] & 2;
  std::string_view pattern(reinterpret_cast<const char*>(data + 1), size - 1);
  auto e = ferry::constraint::CompileRegex(pattern, o);
  if (!e.ok()) return 0;
  ferry::constraint::Grammar g;
  g.Define(g.RuleId("root"), *e);
  g.set_root(0);
  ferry::constraint::RunCompiled(g, pattern);
  return 0;
}
