// WeightSource helpers and format detection.
#include "formats/weight_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

namespace ferry::formats {

int64_t TensorRef::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorRef::ShapeString() const {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

const TensorRef* WeightSource::FindTensor(std::string_view name) const {
  for (const TensorRef& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

size_t WeightSource::TensorBytes() const {
  size_t total = 0;
  for (const TensorRef& t : tensors_) total += t.nbytes;
  return total;
}

StatusOr<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return NotFoundError("model path '{}' does not exist", path);
  if (std::filesystem::is_directory(status)) return OpenHuggingFaceFolder(path);

  // Sniff the first 4 bytes; the loaders re-check everything.
  unsigned char magic[4] = {};
  size_t got = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    got = std::fread(magic, 1, sizeof(magic), f);
    std::fclose(f);
  } else {
    return IoError("cannot open '{}'", path);
  }
  if (got == 4 && std::memcmp(magic, "GGUF", 4) == 0) return OpenGguf(path);
  if (got == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0)
    return UnsupportedError(
        "'{}' is a zip archive (a PyTorch .pt/.bin checkpoint?); convert it to safetensors or "
        "GGUF, or pass the Hugging Face folder",
        path);
  if (std::filesystem::path(path).extension() == ".safetensors")
    return UnsupportedError(
        "'{}' is a bare safetensors file; pass the Hugging Face folder that holds it and its "
        "config.json",
        path);
  return OpenLlama2c(path);
}

}  // namespace ferry::formats
