// AlignedBuffer: move-only, 64-byte aligned heap memory (cache line / AVX-512 friendly).
// Large buffers (repacked weights, KV pools) start on a 2 MiB boundary and ask Linux for
// transparent huge pages: streaming hundreds of MB per token through 4 KiB pages costs a TLB
// miss (a two-level page walk under virtualization) every 4 KiB, and hardware prefetchers stop
// at 4 KiB page boundaries.
#pragma once

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace ferry {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    const bool huge = rounded >= kHugePage;
    void* p = nullptr;
    if (posix_memalign(&p, huge ? kHugePage : kAlignment, rounded) != 0) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(p);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_); }
  size_t size() const { return size_; }
  void Zero() { if (data_) std::memset(data_, 0, size_); }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ferry
