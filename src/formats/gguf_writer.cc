// GGUF v3 writer: metadata in insertion order, tensors aligned, written through a temp file
// that is renamed into place so a failed write never leaves a half file under the real name.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unordered_set>

#include "base/progress.h"
#include "formats/gguf.h"
#include "formats/gguf_format.h"

namespace ferry::formats {
namespace {

using Type = MetaValue::Type;

template <typename T>
void Put(std::string* buf, T v) {
  buf->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutString(std::string* buf, const std::string& s) {
  Put<uint64_t>(buf, s.size());
  buf->append(s);
}

// Appends the value's payload (no type tag: the caller writes the tag or the array elem type).
Status PutValue(std::string* buf, const MetaValue& v, const std::string& key, int depth) {
  switch (v.type) {
    case Type::kU8:
      Put<uint8_t>(buf, static_cast<uint8_t>(v.u));
      break;
    case Type::kI8:
      Put<int8_t>(buf, static_cast<int8_t>(v.i));
      break;
    case Type::kU16:
      Put<uint16_t>(buf, static_cast<uint16_t>(v.u));
      break;
    case Type::kI16:
      Put<int16_t>(buf, static_cast<int16_t>(v.i));
      break;
    case Type::kU32:
      Put<uint32_t>(buf, static_cast<uint32_t>(v.u));
      break;
    case Type::kI32:
      Put<int32_t>(buf, static_cast<int32_t>(v.i));
      break;
    case Type::kU64:
      Put<uint64_t>(buf, v.u);
      break;
    case Type::kI64:
      Put<int64_t>(buf, v.i);
      break;
    case Type::kF32:
      Put<float>(buf, static_cast<float>(v.f));
      break;
    case Type::kF64:
      Put<double>(buf, v.f);
      break;
    case Type::kBool:
      Put<uint8_t>(buf, v.i ? 1 : 0);
      break;
    case Type::kString:
      PutString(buf, v.s);
      break;
    case Type::kArray: {
      if (depth >= gguf::kMaxArrayDepth)
        return InvalidArgumentError("GGUF metadata '{}': arrays nested deeper than {} levels", key,
                                    gguf::kMaxArrayDepth);
      if (!gguf::IsKnownValueType(static_cast<uint32_t>(v.elem_type)))
        return InvalidArgumentError("GGUF metadata '{}': unknown array element type {}", key,
                                    static_cast<uint32_t>(v.elem_type));
      Put<uint32_t>(buf, static_cast<uint32_t>(v.elem_type));
      Put<uint64_t>(buf, v.arr.size());
      for (const MetaValue& item : v.arr) {
        if (item.type != v.elem_type)
          return InvalidArgumentError("GGUF metadata '{}': array of {} holds a {} element", key,
                                      gguf::ValueTypeName(static_cast<uint32_t>(v.elem_type)),
                                      gguf::ValueTypeName(static_cast<uint32_t>(item.type)));
        FERRY_RETURN_IF_ERROR(PutValue(buf, item, key, depth + 1));
      }
      break;
    }
    default:
      return InvalidArgumentError("GGUF metadata '{}': unknown value type {}", key,
                                  static_cast<uint32_t>(v.type));
  }
  return Status::Ok();
}

uint64_t AlignUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// Keys that describe where a loaded source came from, not the model: never written out.
bool IsSourceOnlyKey(const std::string& key) {
  return key.rfind("ferry.source.", 0) == 0 || key == gguf::kAlignmentKey;
}

class FileCloser {
 public:
  explicit FileCloser(std::FILE* f) : f_(f) {}
  ~FileCloser() {
    if (f_) std::fclose(f_);
  }
  std::FILE* get() const { return f_; }
  int Close() {
    int rc = std::fclose(f_);
    f_ = nullptr;
    return rc;
  }

 private:
  std::FILE* f_;
};

Status WriteAll(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n) return IoError("{}: write failed (disk full?)", path);
  return Status::Ok();
}

}  // namespace

Status WriteGguf(const std::string& path, const Metadata& metadata,
                 const std::vector<GgufTensorToWrite>& tensors, const GgufWriteOptions& options) {
  const uint64_t align = options.alignment;
  if (align == 0 || (align & (align - 1)) != 0)
    return InvalidArgumentError("GGUF alignment must be a power of two, got {}", align);

  // Header, metadata and tensor infos are small: build them in memory.
  std::string head;
  head.append(gguf::kMagic, 4);
  Put<uint32_t>(&head, 3);
  Put<uint64_t>(&head, tensors.size());
  uint64_t n_kv = 0;
  for (const auto& [key, value] : metadata.entries()) n_kv += IsSourceOnlyKey(key) ? 0 : 1;
  if (align != gguf::kDefaultAlignment) ++n_kv;
  Put<uint64_t>(&head, n_kv);
  for (const auto& [key, value] : metadata.entries()) {
    if (IsSourceOnlyKey(key)) continue;
    PutString(&head, key);
    Put<uint32_t>(&head, static_cast<uint32_t>(value.type));
    FERRY_RETURN_IF_ERROR(PutValue(&head, value, key, 0));
  }
  if (align != gguf::kDefaultAlignment) {
    PutString(&head, gguf::kAlignmentKey);
    Put<uint32_t>(&head, static_cast<uint32_t>(Type::kU32));
    Put<uint32_t>(&head, static_cast<uint32_t>(align));
  }

  std::unordered_set<std::string> names;
  uint64_t offset = 0;  // relative to the data section
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors.size());
  for (const GgufTensorToWrite& t : tensors) {
    if (!names.insert(t.name).second)
      return InvalidArgumentError("GGUF writer: duplicate tensor '{}'", t.name);
    if (t.shape.size() > gguf::kMaxDims)
      return InvalidArgumentError("GGUF writer: tensor '{}' has {} dims (max {})", t.name, t.shape.size(),
                                  gguf::kMaxDims);
    uint64_t rows = 1;
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) {
      if (t.shape[d] < 0) return InvalidArgumentError("GGUF writer: tensor '{}' has a negative dim", t.name);
      rows *= static_cast<uint64_t>(t.shape[d]);
    }
    const int64_t ne0 = t.shape.empty() ? 1 : t.shape.back();
    auto row = RowBytesChecked(t.dtype, ne0);
    if (!row)
      return InvalidArgumentError(
          "GGUF writer: tensor '{}' row length {} is not a multiple of the {} block size", t.name, ne0,
          DTypeName(t.dtype));
    if (rows * *row != t.nbytes || (t.nbytes > 0 && t.data == nullptr))
      return InvalidArgumentError("GGUF writer: tensor '{}' {} shape needs {} bytes but {} were given",
                                  t.name, DTypeName(t.dtype), rows * *row, t.nbytes);
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) Put<uint64_t>(&head, static_cast<uint64_t>(t.shape[d]));
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dtype));
    Put<uint64_t>(&head, offset);
    offsets.push_back(offset);
    offset = AlignUp(offset + t.nbytes, align);
  }
  if (!tensors.empty()) head.resize(AlignUp(head.size(), align), '\0');

  const std::string tmp = path + ".tmp";
  FileCloser file(std::fopen(tmp.c_str(), "wb"));
  if (!file.get()) return IoError("cannot create '{}'", tmp);
  auto fail = [&](Status st) {
    file.Close();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return st;
  };
  if (Status st = WriteAll(file.get(), head.data(), head.size(), tmp); !st.ok()) return fail(st);

  uint64_t total = 0;
  for (const auto& t : tensors) total += t.nbytes;
  ProgressBar bar("writing " + path, static_cast<int64_t>(total), options.show_progress);
  uint64_t done = 0, pos = 0;
  static const char kZeros[256] = {};
  constexpr size_t kChunk = size_t{64} << 20;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const GgufTensorToWrite& t = tensors[k];
    while (pos < offsets[k]) {  // padding up to the aligned offset
      size_t n = static_cast<size_t>(std::min<uint64_t>(offsets[k] - pos, sizeof(kZeros)));
      if (Status st = WriteAll(file.get(), kZeros, n, tmp); !st.ok()) return fail(st);
      pos += n;
    }
    const char* p = static_cast<const char*>(t.data);
    for (size_t at = 0; at < t.nbytes; at += kChunk) {
      size_t n = std::min(kChunk, t.nbytes - at);
      if (Status st = WriteAll(file.get(), p + at, n, tmp); !st.ok()) return fail(st);
      done += n;
      bar.Update(static_cast<int64_t>(done), t.name);
    }
    pos += t.nbytes;
  }
  if (!tensors.empty()) {  // ggml pads the last tensor too
    uint64_t end = AlignUp(pos, align);
    while (pos < end) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(end - pos, sizeof(kZeros)));
      if (Status st = WriteAll(file.get(), kZeros, n, tmp); !st.ok()) return fail(st);
      pos += n;
    }
  }
  bar.Finish();
  if (file.Close() != 0) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return IoError("{}: write failed on close (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return IoError("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
  return Status::Ok();
}

}  // namespace ferry::formats
