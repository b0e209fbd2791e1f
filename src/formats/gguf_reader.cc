// GGUF v2/v3 reader: every count, length and offset is checked against the file size before
// anything is allocated or read; tensors stay in place (zero copy).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "formats/byte_reader.h"
#include "formats/gguf.h"
#include "formats/gguf_format.h"
#include "formats/loaded_source.h"

namespace ferry::formats {
namespace {

using Type = MetaValue::Type;

constexpr const char* kHint = "the file is truncated or corrupt (re-download or re-convert it)";

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // outermost first (ne reversed)
  uint64_t offset;             // relative to the data section
  uint64_t nbytes;
};

class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size, const std::string& path) : r_(data, size, path), path_(path) {}

  Status Parse(LoadedWeightSource* src) {
    FERRY_RETURN_IF_ERROR(ParseHeader());
    FERRY_RETURN_IF_ERROR(ParseMetadata(&src->mutable_metadata()));
    std::vector<TensorInfo> infos;
    FERRY_RETURN_IF_ERROR(ParseTensorInfos(&infos));
    FERRY_RETURN_IF_ERROR(PlaceTensors(infos, &src->mutable_tensors()));
    src->mutable_metadata().SetString("ferry.source.format", fmt::format("gguf v{}", version_));
    return Status::Ok();
  }

 private:
  Status ParseHeader() {
    std::string_view magic;
    if (r_.size() < 4)
      return CorruptFileError("{}: not a GGUF file: only {} bytes (a GGUF file starts with 'GGUF')", path_,
                              r_.size());
    FERRY_RETURN_IF_ERROR(r_.ReadBytes(4, &magic, "magic"));
    if (magic != std::string_view(gguf::kMagic, 4))
      return CorruptFileError("{}: not a GGUF file: magic bytes {:02x} {:02x} {:02x} {:02x}, expected 'GGUF'",
                              path_, static_cast<uint8_t>(magic[0]), static_cast<uint8_t>(magic[1]),
                              static_cast<uint8_t>(magic[2]), static_cast<uint8_t>(magic[3]));
    FERRY_RETURN_IF_ERROR(r_.Read(&version_, "header version"));
    if (version_ == 1)
      return UnsupportedError(
          "{}: GGUF version 1 is not supported (only v2 and v3); re-convert the model "
          "with a current llama.cpp",
          path_);
    if (version_ != 2 && version_ != 3)
      return UnsupportedError("{}: unsupported GGUF version {} (only v2 and v3 are supported)", path_,
                              version_);
    FERRY_RETURN_IF_ERROR(r_.Read(&n_tensors_, "header tensor_count"));
    FERRY_RETURN_IF_ERROR(r_.Read(&n_kv_, "header metadata_kv_count"));
    // Each KV takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least
    // 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset). Counts beyond that are lies.
    uint64_t need = 0;
    if (MulOverflows(n_kv_, 13, &need) || need > r_.remaining())
      return CorruptFileError(
          "{}: header metadata_kv_count {} cannot fit in the {} bytes after the header; {}", path_, n_kv_,
          r_.remaining(), kHint);
    if (MulOverflows(n_tensors_, 24, &need) || need > r_.remaining())
      return CorruptFileError("{}: header tensor_count {} cannot fit in the {} bytes after the header; {}",
                              path_, n_tensors_, r_.remaining(), kHint);
    return Status::Ok();
  }

  Status ReadString(std::string* out, std::string_view what) {
    uint64_t len = 0;
    FERRY_RETURN_IF_ERROR(r_.Read(&len, what));
    if (len > r_.remaining())
      return CorruptFileError(
          "{}: {}: string length {} at offset {} exceeds the {} bytes left in the file; {}", path_, what, len,
          r_.pos() - 8, r_.remaining(), kHint);
    std::string_view bytes;
    FERRY_RETURN_IF_ERROR(r_.ReadBytes(len, &bytes, what));
    out->assign(bytes);
    return Status::Ok();
  }

  template <typename T>
  Status ReadScalar(T* v, const std::string& key) {
    return r_.Read(v, fmt::format("value of key '{}'", key));
  }

  Status ReadValue(uint32_t type, int depth, const std::string& key, MetaValue* out) {
    switch (static_cast<Type>(type)) {
      case Type::kU8: {
        uint8_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Uint(v, Type::kU8);
        break;
      }
      case Type::kI8: {
        int8_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Int(v, Type::kI8);
        break;
      }
      case Type::kU16: {
        uint16_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Uint(v, Type::kU16);
        break;
      }
      case Type::kI16: {
        int16_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Int(v, Type::kI16);
        break;
      }
      case Type::kU32: {
        uint32_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Uint(v, Type::kU32);
        break;
      }
      case Type::kI32: {
        int32_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Int(v, Type::kI32);
        break;
      }
      case Type::kU64: {
        uint64_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Uint(v, Type::kU64);
        break;
      }
      case Type::kI64: {
        int64_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Int(v, Type::kI64);
        break;
      }
      case Type::kF32: {
        float v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Float(v, Type::kF32);
        break;
      }
      case Type::kF64: {
        double v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Float(v, Type::kF64);
        break;
      }
      case Type::kBool: {
        uint8_t v = 0;
        FERRY_RETURN_IF_ERROR(ReadScalar(&v, key));
        *out = MetaValue::Bool(v != 0);
        break;
      }
      case Type::kString: {
        std::string s;
        FERRY_RETURN_IF_ERROR(ReadString(&s, fmt::format("string value of key '{}'", key)));
        *out = MetaValue::String(std::move(s));
        break;
      }
      case Type::kArray: {
        if (depth >= gguf::kMaxArrayDepth)
          return CorruptFileError("{}: key '{}': arrays nested deeper than {} levels; {}", path_, key,
                                  gguf::kMaxArrayDepth, kHint);
        uint32_t elem = 0;
        uint64_t n = 0;
        FERRY_RETURN_IF_ERROR(r_.Read(&elem, fmt::format("array element type of key '{}'", key)));
        if (!gguf::IsKnownValueType(elem))
          return CorruptFileError("{}: key '{}': unknown array element type id {} at offset {}; {}", path_,
                                  key, elem, r_.pos() - 4, kHint);
        FERRY_RETURN_IF_ERROR(r_.Read(&n, fmt::format("array length of key '{}'", key)));
        uint64_t need = 0;
        if (MulOverflows(n, gguf::MinValueSize(elem), &need) || need > r_.remaining())
          return CorruptFileError("{}: key '{}': array of {} {} values cannot fit in the {} bytes left; {}",
                                  path_, key, n, gguf::ValueTypeName(elem), r_.remaining(), kHint);
        std::vector<MetaValue> items;
        items.reserve(static_cast<size_t>(n));
        for (uint64_t k = 0; k < n; ++k) {
          MetaValue item;
          FERRY_RETURN_IF_ERROR(ReadValue(elem, depth + 1, key, &item));
          items.push_back(std::move(item));
        }
        *out = MetaValue::Array(static_cast<Type>(elem), std::move(items));
        break;
      }
      default:
        return CorruptFileError("{}: key '{}': unknown value type id {} at offset {}; {}", path_, key, type,
                                r_.pos() - 4, kHint);
    }
    return Status::Ok();
  }

  Status ParseMetadata(Metadata* meta) {
    for (uint64_t k = 0; k < n_kv_; ++k) {
      std::string key;
      FERRY_RETURN_IF_ERROR(ReadString(&key, fmt::format("key of metadata entry {}", k)));
      if (meta->Has(key))
        return CorruptFileError("{}: duplicate metadata key '{}' (entry {}); {}", path_, key, k, kHint);
      uint32_t type = 0;
      FERRY_RETURN_IF_ERROR(r_.Read(&type, fmt::format("type of key '{}'", key)));
      MetaValue value;
      FERRY_RETURN_IF_ERROR(ReadValue(type, 0, key, &value));
      if (key == gguf::kAlignmentKey) {
        if (!value.IsInteger() || value.type == Type::kBool || value.i <= 0 ||
            (value.i & (value.i - 1)) != 0 || value.i > (int64_t{1} << 30))
          return CorruptFileError("{}: key '{}' must be a positive power of two integer, got {} ({}); {}",
                                  path_, key, value.ToString(), gguf::ValueTypeName(type), kHint);
        alignment_ = static_cast<uint64_t>(value.i);
      }
      meta->Set(std::move(key), std::move(value));
    }
    return Status::Ok();
  }

  Status ParseTensorInfos(std::vector<TensorInfo>* infos) {
    std::unordered_set<std::string> names;
    infos->reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t t = 0; t < n_tensors_; ++t) {
      TensorInfo info;
      FERRY_RETURN_IF_ERROR(ReadString(&info.name, fmt::format("name of tensor {}", t)));
      const std::string what = fmt::format("tensor '{}'", info.name);
      if (!names.insert(info.name).second)
        return CorruptFileError("{}: duplicate tensor name '{}' (tensor {}); {}", path_, info.name, t, kHint);
      uint32_t n_dims = 0;
      FERRY_RETURN_IF_ERROR(r_.Read(&n_dims, what + " n_dims"));
      if (n_dims > gguf::kMaxDims)
        return CorruptFileError("{}: {}: n_dims {} exceeds the maximum of {}; {}", path_, what, n_dims,
                                gguf::kMaxDims, kHint);
      uint64_t ne[gguf::kMaxDims] = {1, 1, 1, 1};
      uint64_t numel = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        FERRY_RETURN_IF_ERROR(r_.Read(&ne[d], fmt::format("{} ne[{}]", what, d)));
        if (ne[d] > static_cast<uint64_t>(INT64_MAX) || MulOverflows(numel, ne[d], &numel) ||
            numel > static_cast<uint64_t>(INT64_MAX))
          return CorruptFileError("{}: {}: dimension ne[{}] = {} overflows the element count; {}", path_,
                                  what, d, ne[d], kHint);
      }
      uint32_t type_id = 0;
      FERRY_RETURN_IF_ERROR(r_.Read(&type_id, what + " type"));
      auto traits = FindDType(type_id);
      if (!traits || traits->type == DType::kU8)  // u8 is safetensors-only (no ggml id)
        return UnsupportedError(
            "{}: {}: unknown tensor type id {} (a newer or corrupt file; Ferry knows the "
            "ggml types f32, f16, bf16, q4_0..q8_1, q2_k..q8_k, i8..f64)",
            path_, what, type_id);
      info.dtype = traits->type;
      FERRY_RETURN_IF_ERROR(r_.Read(&info.offset, what + " offset"));
      for (uint32_t d = n_dims; d-- > 0;) info.shape.push_back(static_cast<int64_t>(ne[d]));
      auto row = RowBytesChecked(info.dtype, static_cast<int64_t>(ne[0]));
      if (!row)
        return CorruptFileError("{}: {}: row length ne[0] = {} is not a multiple of the {} block size {}; {}",
                                path_, what, ne[0], traits->name, traits->block_size, kHint);
      uint64_t rows = ne[1];
      if (MulOverflows(rows, ne[2], &rows) || MulOverflows(rows, ne[3], &rows) ||
          MulOverflows(rows, static_cast<uint64_t>(*row), &info.nbytes))
        return CorruptFileError("{}: {}: byte size overflows; {}", path_, what, kHint);
      infos->push_back(std::move(info));
    }
    return Status::Ok();
  }

  Status PlaceTensors(std::vector<TensorInfo>& infos, std::vector<TensorRef>* out) {
    uint64_t data_start = 0;
    if (AddOverflows(r_.pos(), alignment_ - 1, &data_start))
      return InternalError("{}: data section offset overflows", path_);
    data_start = data_start / alignment_ * alignment_;
    const uint64_t file_size = r_.size();
    if (!infos.empty() && data_start > file_size)
      return CorruptFileError(
          "{}: the tensor data section would start at offset {} past end of file (size {}); {}", path_,
          data_start, file_size, kHint);
    for (const TensorInfo& info : infos) {
      if (info.offset % alignment_ != 0)
        return CorruptFileError("{}: tensor '{}': data offset {} is not a multiple of the alignment {}; {}",
                                path_, info.name, info.offset, alignment_, kHint);
      uint64_t begin = 0, end = 0;
      bool overflow = AddOverflows(data_start, info.offset, &begin);
      overflow = AddOverflows(begin, info.nbytes, &end) || overflow;
      if (overflow || end > file_size)
        return CorruptFileError("{}: tensor '{}': data [{}, {}){} past end of file (size {}); {}", path_,
                                info.name, begin, end, overflow ? " (overflowing)" : "", file_size, kHint);
    }
    std::vector<size_t> order(infos.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return infos[a].offset < infos[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& a = infos[order[k - 1]];
      const TensorInfo& b = infos[order[k]];
      if (a.nbytes > 0 && b.nbytes > 0 && a.offset + a.nbytes > b.offset)
        return CorruptFileError("{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap in the data section; {}",
                                path_, a.name, a.offset, a.offset + a.nbytes, b.name, b.offset,
                                b.offset + b.nbytes, kHint);
    }
    out->reserve(infos.size());
    for (TensorInfo& info : infos) {
      TensorRef ref;
      ref.name = std::move(info.name);
      ref.dtype = info.dtype;
      ref.shape = std::move(info.shape);
      ref.data = r_.data() + data_start + info.offset;
      ref.nbytes = static_cast<size_t>(info.nbytes);
      out->push_back(std::move(ref));
    }
    return Status::Ok();
  }

  ByteReader r_;
  const std::string& path_;
  uint32_t version_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t alignment_ = gguf::kDefaultAlignment;
};

}  // namespace

StatusOr<std::unique_ptr<WeightSource>> ParseGguf(const uint8_t* data, size_t size, const std::string& path) {
  auto src = std::make_unique<LoadedWeightSource>(path);
  GgufParser parser(data, size, src->path());
  FERRY_RETURN_IF_ERROR(parser.Parse(src.get()));
  return std::unique_ptr<WeightSource>(std::move(src));
}

StatusOr<std::unique_ptr<WeightSource>> OpenGguf(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto src = std::make_unique<LoadedWeightSource>(path);
  const MappedFile& kept = src->KeepFile(std::move(file));
  GgufParser parser(kept.data(), kept.size(), src->path());
  FERRY_RETURN_IF_ERROR(parser.Parse(src.get()));
  return std::unique_ptr<WeightSource>(std::move(src));
}

}  // namespace ferry::formats
