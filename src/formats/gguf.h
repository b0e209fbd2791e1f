// GGUF v2/v3 reader (bounds-checked, zero-copy over mmap) and writer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/weight_source.h"

namespace ferry {
class ProgressBar;
}  // namespace ferry

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
  std::string progress_label;  // the bar's label; empty: "writing <path>"
};

// What a GGUF header says about one tensor: name, type and shape (outermost first).
struct GgufTensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

// Writes a GGUF v3 file one tensor at a time, so a writer holds one tensor in memory, not the
// model (make-model's qwen3moe-30b-a3b is 17 GB at q4_0; the machines have 23 GB). Create()
// checks every tensor's info and writes the header; Append() takes the next tensor's bytes in
// the header's order; Finish() pads, closes and renames `path`.tmp into place. A writer
// destroyed before a successful Finish() removes the temp file, so a failed or abandoned write
// never leaves a file under either name. Move-only.
class GgufStreamWriter {
 public:
  static StatusOr<GgufStreamWriter> Create(const std::string& path, const Metadata& metadata,
                                           std::vector<GgufTensorInfo> tensors,
                                           const GgufWriteOptions& options = {});
  GgufStreamWriter(GgufStreamWriter&& other) noexcept;
  GgufStreamWriter& operator=(GgufStreamWriter&& other) noexcept;
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;
  ~GgufStreamWriter();

  // The bytes of tensor `next()`: exactly the size its type and shape need. An error (size
  // mismatch, every tensor already written, a failed write) abandons the file.
  Status Append(const void* data, size_t nbytes);
  // Every tensor must have been appended.
  Status Finish();
  size_t next() const { return next_; }

 private:
  GgufStreamWriter() = default;
  void Abandon();              // closes and removes the temp file, if any
  Status Fail(Status status);  // Abandon() when `status` is an error; returns it
  Status Pad(uint64_t to);     // zeros from pos_ up to file data offset `to`

  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  std::vector<GgufTensorInfo> tensors_;
  std::vector<uint64_t> offsets_;  // [tensors]: data offset of each, aligned
  std::vector<uint64_t> nbytes_;   // [tensors]
  uint64_t align_ = 32;
  uint64_t pos_ = 0;                  // bytes of the data section written
  uint64_t written_ = 0, total_ = 0;  // tensor bytes, for the progress bar
  size_t next_ = 0;
  std::unique_ptr<ProgressBar> bar_;
};

// Writes GGUF v3 (metadata in insertion order, tensors in the given order, each aligned).
// "general.alignment" is written (as u32) only when options.alignment != 32; any
// "general.alignment" or "ferry.source.*" key in `metadata` is dropped (they describe the file
// that was read, not the model). Writes `path`.tmp and renames it into place.
Status WriteGguf(const std::string& path, const Metadata& metadata,
                 const std::vector<GgufTensorToWrite>& tensors, const GgufWriteOptions& options = {});

}  // namespace ferry::formats
