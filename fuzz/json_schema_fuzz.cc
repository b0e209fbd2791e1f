// libFuzzer target: the JSON Schema compiler (any JSON text), lowering and the matcher.
#include <cstddef>
#include <cstdint>

#include "constraint/json_schema.h"
#include "constraint_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ferry::constraint::RunCompiled(ferry::constraint::JsonSchemaGrammar(text), text);
  return 0;
}
