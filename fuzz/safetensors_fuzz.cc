// libFuzzer target: ParseSafetensors must return a Status for any bytes, never crash or read out of bounds.
#include <cstddef>
#include <cstdint>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensors = ferry::formats::ParseSafetensors(data, size, "fuzz.safetensors");
  if (!tensors.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& t : *tensors) {
    if (t.nbytes == 0) continue;
    sink = sink ^ static_cast<const uint8_t*>(t.data)[0] ^ static_cast<const uint8_t*>(t.data)[t.nbytes - 1];
  }
  return 0;
}
