// Fuzzes the prefix cache's disk-tier block file parser (kv/block_file.h): any bytes either
// parse into a payload inside the input or fail with an error, never crash or read past it.
// The fingerprint and hash expected are taken from the input's own header, so mutations get
// past the identity checks to the length and checksum logic; an accepted file must re-encode
// to exactly its bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "kv/block_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  uint64_t fingerprint = 0, hash = 0;
  if (size >= 24) {
    std::memcpy(&fingerprint, data + 8, 8);
    std::memcpy(&hash, data + 16, 8);
  }
  auto payload = ferry::kv::ParseBlockFile(file, fingerprint, hash);
  if (!payload.ok()) return 0;
  if (payload->data() < data || payload->data() + payload->size() > data + size) std::abort();
  const std::vector<uint8_t> again = ferry::kv::EncodeBlockFile(fingerprint, hash, *payload);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  return 0;
}
