// libFuzzer target: the GBNF grammar parser, lowering and the matcher on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "constraint/gbnf_parser.h"
#include "constraint_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ferry::constraint::RunCompiled(ferry::constraint::ParseGbnf(text), text);
  return 0;
}
