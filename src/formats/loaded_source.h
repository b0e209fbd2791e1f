// LoadedWeightSource: the one concrete WeightSource every loader fills in; it owns the mapped
// files and any synthesized/dequantized tensor storage the TensorRefs point into.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/mapped_file.h"
#include "formats/weight_source.h"

namespace ferry::formats {

class LoadedWeightSource : public WeightSource {
 public:
  LoadedWeightSource() = default;
  explicit LoadedWeightSource(std::string path) { path_ = std::move(path); }

  void set_path(std::string path) { path_ = std::move(path); }
  std::vector<TensorRef>& mutable_tensors() { return tensors_; }

  // Keeps a mapping alive for as long as the source; returns it (its data pointer is stable).
  const MappedFile& KeepFile(MappedFile file) {
    files_.push_back(std::make_unique<MappedFile>(std::move(file)));
    return *files_.back();
  }
  // Storage owned by the source for tensors that are not in a file (dequantized, synthesized).
  // Returns nullptr when the allocation fails.
  void* AllocateOwned(size_t nbytes) {
    try {
      buffers_.emplace_back(nbytes);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    return buffers_.back().data();
  }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<AlignedBuffer> buffers_;
};

}  // namespace ferry::formats
