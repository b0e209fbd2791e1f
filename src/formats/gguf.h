// GGUF v2/v3 reader (bounds-checked, zero-copy over mmap) and writer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/weight_source.h"

namespace ferry::formats {

// Parses a GGUF image already in memory (the fuzz target calls this directly).
// `data` must outlive the returned source; `path` only names the file in errors.
StatusOr<std::unique_ptr<WeightSource>> ParseGguf(const uint8_t* data, size_t size, const std::string& path);

// A tensor to write: name, type, shape (outermost first) and its packed bytes.
struct GgufTensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t nbytes;
};

struct GgufWriteOptions {
  uint32_t alignment = 32;
  bool show_progress = false;
};

// Writes GGUF v3 (metadata in insertion order, tensors in the given order, each aligned).
// "general.alignment" is written (as u32) only when options.alignment != 32; any
// "general.alignment" or "ferry.source.*" key in `metadata` is dropped (they describe the file
// that was read, not the model). Writes `path`.tmp and renames it into place.
Status WriteGguf(const std::string& path, const Metadata& metadata,
                 const std::vector<GgufTensorToWrite>& tensors, const GgufWriteOptions& options = {});

}  // namespace ferry::formats
