// libFuzzer target: ParseGguf must return a Status for any bytes, never crash or read out of bounds.
#include <cstddef>
#include <cstdint>

#include "formats/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto src = ferry::formats::ParseGguf(data, size, "fuzz.gguf");
  if (!src.ok()) return 0;
  // Touch what the parser accepted: the first and last byte of every tensor must be in bounds.
  volatile uint8_t sink = 0;
  for (const auto& t : (*src)->tensors()) {
    if (t.nbytes == 0) continue;
    sink = sink ^ static_cast<const uint8_t*>(t.data)[0] ^ static_cast<const uint8_t*>(t.data)[t.nbytes - 1];
    (void)t.NumElements();
  }
  for (const auto& [key, value] : (*src)->metadata().entries()) (void)value.ToString();
  return 0;
}
