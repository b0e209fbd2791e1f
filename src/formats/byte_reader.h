// ByteReader: a bounds-checked little-endian cursor over untrusted bytes; every read fails
// with a Status naming the file, the field and the offset instead of reading past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"

namespace ferry::formats {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* data() const { return data_; }
  const std::string& path() const { return path_; }

  // Reads a little-endian scalar (the host is little-endian: x86-64 / aarch64).
  template <typename T>
  Status Read(T* out, std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return Truncated(sizeof(T), what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  // A view of the next n bytes (n checked against what is left before anything is touched).
  Status ReadBytes(uint64_t n, std::string_view* out, std::string_view what) {
    if (n > remaining()) return Truncated(n, what);
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return Status::Ok();
  }

  Status Skip(uint64_t n, std::string_view what) {
    std::string_view ignored;
    return ReadBytes(n, &ignored, what);
  }

  Status Truncated(uint64_t need, std::string_view what) const {
    return CorruptFileError(
        "{}: truncated: {} needs {} bytes at offset {} but the file has {} bytes; the file is "
        "incomplete or corrupt (re-download or re-convert it)",
        path_, what, need, pos_, size_);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

// Overflow-safe helpers for sizes read from files.
inline bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
inline bool AddOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

}  // namespace ferry::formats
