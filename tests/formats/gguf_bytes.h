// Test helper: assembles GGUF images byte by byte so tests can write valid and broken files.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace ferry::testing {

class GgufBytes {
 public:
  GgufBytes& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  template <typename T>
  GgufBytes& Put(T v) {
    return Raw(&v, sizeof(T));
  }
  GgufBytes& Str(const std::string& s) {
    Put<uint64_t>(s.size());
    return Raw(s.data(), s.size());
  }
  GgufBytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    Raw("GGUF", 4);
    Put<uint32_t>(version);
    Put<uint64_t>(n_tensors);
    return Put<uint64_t>(n_kv);
  }
  GgufBytes& KvU32(const std::string& key, uint32_t v) {
    Str(key);
    Put<uint32_t>(4);
    return Put<uint32_t>(v);
  }
  GgufBytes& KvString(const std::string& key, const std::string& v) {
    Str(key);
    Put<uint32_t>(8);
    return Str(v);
  }
  // ne innermost first, as GGUF stores it.
  GgufBytes& Tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    Str(name);
    Put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) Put<uint64_t>(d);
    Put<uint32_t>(type);
    return Put<uint64_t>(offset);
  }
  GgufBytes& Align(size_t a = 32) {
    while (bytes.size() % a) bytes.push_back(0);
    return *this;
  }
  GgufBytes& Zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }

  std::vector<uint8_t> bytes;
};

inline std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace ferry::testing
