// safetensors reader (bounds-checked, zero-copy over mmap) and writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/weight_source.h"

namespace ferry::formats {

struct SafetensorsTensor {
  std::string name;  // as stored (HF naming)
  DType dtype;       // F32/F16/BF16 (+ I8/I32 etc. for completeness)
  std::vector<int64_t> shape;
  const void* data;  // into the buffer
  size_t nbytes;
};

// Parses a safetensors image in memory (header JSON + data); every offset checked. Tensors come
// back in data-offset order; `data` points into the image and may be unaligned (the header
// length is arbitrary). "__metadata__" is ignored.
// `path` only names the file in errors.
StatusOr<std::vector<SafetensorsTensor>> ParseSafetensors(const uint8_t* data, size_t size,
                                                          const std::string& path);

// Writes tensors in the given order (header padded to 8 bytes, __metadata__ {"format": "pt"}).
Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors);

}  // namespace ferry::formats
