// GGUF v3 writer: metadata in insertion order, tensors aligned, written through a temp file
// that is renamed into place so a failed write never leaves a half file under the real name.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unordered_set>
#include <utility>

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

Status WriteAll(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n) return IoError("{}: write failed (disk full?)", path);
  return Status::Ok();
}

}  // namespace

StatusOr<GgufStreamWriter> GgufStreamWriter::Create(const std::string& path, const Metadata& metadata,
                                                    std::vector<GgufTensorInfo> tensors,
                                                    const GgufWriteOptions& options) {
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

  GgufStreamWriter w;
  w.align_ = align;
  std::unordered_set<std::string> names;
  uint64_t offset = 0;  // relative to the data section
  for (const GgufTensorInfo& t : tensors) {
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
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) Put<uint64_t>(&head, static_cast<uint64_t>(t.shape[d]));
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dtype));
    Put<uint64_t>(&head, offset);
    w.offsets_.push_back(offset);
    w.nbytes_.push_back(rows * *row);
    w.total_ += rows * *row;
    offset = AlignUp(offset + rows * *row, align);
  }
  if (!tensors.empty()) head.resize(AlignUp(head.size(), align), '\0');

  w.path_ = path;
  w.tmp_ = path + ".tmp";
  w.tensors_ = std::move(tensors);
  w.file_ = std::fopen(w.tmp_.c_str(), "wb");
  if (!w.file_) return IoError("cannot create '{}'", w.tmp_);
  FERRY_RETURN_IF_ERROR(w.Fail(WriteAll(w.file_, head.data(), head.size(), w.tmp_)));
  w.bar_ = std::make_unique<ProgressBar>(
      options.progress_label.empty() ? "writing " + path : options.progress_label,
      static_cast<int64_t>(w.total_), options.show_progress);
  return w;
}

GgufStreamWriter::GgufStreamWriter(GgufStreamWriter&& other) noexcept {
  *this = std::move(other);
}

GgufStreamWriter& GgufStreamWriter::operator=(GgufStreamWriter&& other) noexcept {
  if (this != &other) {
    Abandon();
    path_ = std::move(other.path_);
    tmp_ = std::exchange(other.tmp_, std::string());
    file_ = std::exchange(other.file_, nullptr);
    tensors_ = std::move(other.tensors_);
    offsets_ = std::move(other.offsets_);
    nbytes_ = std::move(other.nbytes_);
    align_ = other.align_;
    pos_ = other.pos_;
    written_ = other.written_;
    total_ = other.total_;
    next_ = other.next_;
    bar_ = std::move(other.bar_);
  }
  return *this;
}

GgufStreamWriter::~GgufStreamWriter() {
  Abandon();
}

void GgufStreamWriter::Abandon() {
  if (file_) std::fclose(std::exchange(file_, nullptr));
  if (!tmp_.empty()) {
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
    tmp_.clear();
  }
}

Status GgufStreamWriter::Fail(Status status) {
  if (!status.ok()) Abandon();
  return status;
}

Status GgufStreamWriter::Pad(uint64_t to) {
  static const char kZeros[256] = {};
  while (pos_ < to) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(to - pos_, sizeof(kZeros)));
    FERRY_RETURN_IF_ERROR(WriteAll(file_, kZeros, n, tmp_));
    pos_ += n;
  }
  return Status::Ok();
}

Status GgufStreamWriter::Append(const void* data, size_t nbytes) {
  if (file_ == nullptr)
    return InvalidArgumentError("GGUF writer for '{}': the file is already finished or was abandoned", path_);
  if (next_ >= tensors_.size())
    return Fail(InvalidArgumentError("GGUF writer for '{}': all {} tensors were already written", path_,
                                     tensors_.size()));
  const GgufTensorInfo& t = tensors_[next_];
  if (nbytes != nbytes_[next_] || (nbytes > 0 && data == nullptr))
    return Fail(InvalidArgumentError("GGUF writer: tensor '{}' {} shape needs {} bytes but {} were given",
                                     t.name, DTypeName(t.dtype), nbytes_[next_], nbytes));
  FERRY_RETURN_IF_ERROR(Fail(Pad(offsets_[next_])));
  constexpr size_t kChunk = size_t{64} << 20;
  const char* p = static_cast<const char*>(data);
  for (size_t at = 0; at < nbytes; at += kChunk) {
    const size_t n = std::min(kChunk, nbytes - at);
    FERRY_RETURN_IF_ERROR(Fail(WriteAll(file_, p + at, n, tmp_)));
    written_ += n;
    bar_->Update(static_cast<int64_t>(written_), t.name);
  }
  pos_ += nbytes;
  ++next_;
  return Status::Ok();
}

Status GgufStreamWriter::Finish() {
  if (file_ == nullptr)
    return InvalidArgumentError("GGUF writer for '{}': the file is already finished or was abandoned", path_);
  if (next_ != tensors_.size())
    return Fail(InvalidArgumentError("GGUF writer for '{}': {} of {} tensors written (next: '{}')", path_,
                                     next_, tensors_.size(), tensors_[next_].name));
  if (!tensors_.empty()) FERRY_RETURN_IF_ERROR(Fail(Pad(AlignUp(pos_, align_))));  // ggml pads the last too
  bar_->Finish();
  const int rc = std::fclose(std::exchange(file_, nullptr));
  if (rc != 0) return Fail(IoError("{}: write failed on close (disk full?)", tmp_));
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) return Fail(IoError("cannot rename '{}' to '{}': {}", tmp_, path_, ec.message()));
  tmp_.clear();  // nothing left to remove
  return Status::Ok();
}

Status WriteGguf(const std::string& path, const Metadata& metadata,
                 const std::vector<GgufTensorToWrite>& tensors, const GgufWriteOptions& options) {
  std::vector<GgufTensorInfo> infos;
  infos.reserve(tensors.size());
  for (const GgufTensorToWrite& t : tensors) infos.push_back({t.name, t.dtype, t.shape});
  FERRY_ASSIGN_OR_RETURN(GgufStreamWriter writer,
                         GgufStreamWriter::Create(path, metadata, std::move(infos), options));
  for (const GgufTensorToWrite& t : tensors) FERRY_RETURN_IF_ERROR(writer.Append(t.data, t.nbytes));
  return writer.Finish();
}

}  // namespace ferry::formats
