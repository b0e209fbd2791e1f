// safetensors reader (bounds-checked, zero-copy over mmap) and writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/weight_source.h"

namespace ferry::formats {

struct SafetensorsTensor {
  std::string name;   // as stored (HF naming)
  DType dtype;        // F32/F16/BF16 (+ I8/I32 etc. for completeness)
  std::vector<int64_t> shape;
  const void* data;   // into the buffer
  size_t nbytes;
};

// Parses a safetensors image in memory (header JSON + data); every offset checked.
// `path` only names the file in errors.
StatusOr<std::vector<SafetensorsTensor>> ParseSafetensors(const uint8_t* data, size_t size,
                                                          const std::string& path);

Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors);

}  // namespace ferry::formats
