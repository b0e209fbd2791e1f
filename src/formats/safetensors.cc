// safetensors reader and writer: 8-byte little-endian header length, JSON header, raw data.
#include "formats/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "formats/byte_reader.h"

namespace ferry::formats {
namespace {

constexpr const char* kHint = "the file is truncated or corrupt (re-download or re-convert it)";

struct DtypeName {
  const char* name;
  DType dtype;
};
constexpr DtypeName kDtypes[] = {{"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16},
                                 {"I8", DType::kI8},   {"I16", DType::kI16}, {"I32", DType::kI32},
                                 {"I64", DType::kI64}, {"F64", DType::kF64}, {"U8", DType::kU8}};

std::optional<DType> DTypeFromSafetensors(std::string_view name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

std::optional<const char*> SafetensorsName(DType t) {
  for (const auto& d : kDtypes)
    if (t == d.dtype) return d.name;
  return std::nullopt;
}

Status ParseEntry(const std::string& path, const std::string& name, const nlohmann::json& v,
                  uint64_t data_size, SafetensorsTensor* out, uint64_t* begin) {
  const std::string what = fmt::format("{}: tensor '{}'", path, name);
  if (!v.is_object()) return CorruptFileError("{}: header entry is not a JSON object; {}", what, kHint);
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string())
    return CorruptFileError("{}: missing or non-string \"dtype\"; {}", what, kHint);
  if (sh == v.end() || !sh->is_array())
    return CorruptFileError("{}: missing or non-array \"shape\"; {}", what, kHint);
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return CorruptFileError("{}: \"data_offsets\" must be [begin, end] with non-negative integers; {}", what,
                            kHint);
  const std::string& dtype_name = dt->get_ref<const std::string&>();
  auto dtype = DTypeFromSafetensors(dtype_name);
  if (!dtype)
    return UnsupportedError(
        "{}: dtype {} is not supported (Ferry reads F32, F16, BF16, I8, I16, I32, I64, F64, U8)", what,
        dtype_name);
  out->name = name;
  out->dtype = *dtype;
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned())
      return CorruptFileError("{}: shape entries must be non-negative integers, got {}; {}", what, d.dump(),
                              kHint);
    uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(INT64_MAX) || MulOverflows(numel, dim, &numel) ||
        numel > static_cast<uint64_t>(INT64_MAX))
      return CorruptFileError("{}: shape {} overflows; {}", what, sh->dump(), kHint);
    out->shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes = 0;
  if (MulOverflows(numel, Traits(*dtype).block_bytes, &nbytes))
    return CorruptFileError("{}: byte size of shape {} overflows; {}", what, sh->dump(), kHint);
  const uint64_t b = (*off)[0].get<uint64_t>();
  const uint64_t e = (*off)[1].get<uint64_t>();
  if (b > e || e > data_size)
    return CorruptFileError("{}: data_offsets [{}, {}) outside the data section of {} bytes; {}", what, b, e,
                            data_size, kHint);
  if (e - b != nbytes)
    return CorruptFileError("{}: data_offsets [{}, {}) hold {} bytes but {} {} needs {}; {}", what, b, e,
                            e - b, dtype_name, sh->dump(), nbytes, kHint);
  out->nbytes = static_cast<size_t>(nbytes);
  *begin = b;
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<SafetensorsTensor>> ParseSafetensors(const uint8_t* data, size_t size,
                                                          const std::string& path) {
  ByteReader r(data, size, path);
  uint64_t header_len = 0;
  FERRY_RETURN_IF_ERROR(r.Read(&header_len, "safetensors header length"));
  if (header_len > r.remaining())
    return CorruptFileError(
        "{}: safetensors header length {} exceeds the {} bytes after it (not a safetensors "
        "file, or {})",
        path, header_len, r.remaining(), kHint);
  std::string_view header;
  FERRY_RETURN_IF_ERROR(r.ReadBytes(header_len, &header, "safetensors header"));
  const uint64_t data_size = r.remaining();
  const uint8_t* data_start = data + r.pos();

  std::vector<SafetensorsTensor> tensors;
  std::vector<uint64_t> begins;
  try {
    nlohmann::json j =
        nlohmann::json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      return CorruptFileError("{}: safetensors header is not valid JSON; {}", path, kHint);
    if (!j.is_object())
      return CorruptFileError("{}: safetensors header is not a JSON object; {}", path, kHint);
    tensors.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      SafetensorsTensor t;
      uint64_t begin = 0;
      FERRY_RETURN_IF_ERROR(ParseEntry(path, it.key(), it.value(), data_size, &t, &begin));
      t.data = data_start + begin;
      tensors.push_back(std::move(t));
      begins.push_back(begin);
    }
  } catch (const std::exception& e) {
    return CorruptFileError("{}: bad safetensors header: {}; {}", path, e.what(), kHint);
  }

  // In data order; zero-size tensors may share an offset, others must not overlap.
  std::vector<size_t> order(tensors.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return begins[a] < begins[b]; });
  std::vector<SafetensorsTensor> sorted;
  sorted.reserve(tensors.size());
  uint64_t prev_end = 0;
  const SafetensorsTensor* prev = nullptr;
  for (size_t k : order) {
    if (tensors[k].nbytes > 0) {
      if (prev && begins[k] < prev_end)
        return CorruptFileError("{}: tensors '{}' and '{}' overlap in the data section (at byte {}); {}",
                                path, prev->name, tensors[k].name, begins[k], kHint);
      prev_end = begins[k] + tensors[k].nbytes;
      prev = &tensors[k];
    }
  }
  for (size_t k : order) sorted.push_back(std::move(tensors[k]));
  return sorted;
}

Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    auto name = SafetensorsName(t.dtype);
    if (!name)
      return UnsupportedError("safetensors writer: tensor '{}' has dtype {} which safetensors cannot hold",
                              t.name, DTypeName(t.dtype));
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return InvalidArgumentError("safetensors writer: tensor '{}' has a negative dim", t.name);
      numel *= static_cast<uint64_t>(d);
    }
    if (numel * Traits(t.dtype).block_bytes != t.nbytes || (t.nbytes > 0 && !t.data))
      return InvalidArgumentError("safetensors writer: tensor '{}' shape needs {} bytes but {} were given",
                                  t.name, numel * Traits(t.dtype).block_bytes, t.nbytes);
    if (t.name == "__metadata__" || header.contains(t.name))
      return InvalidArgumentError("safetensors writer: duplicate or reserved tensor name '{}'", t.name);
    header[t.name] = {{"dtype", *name}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string json = header.dump();
  while (json.size() % 8) json.push_back(' ');  // data starts 8-byte aligned

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return IoError("cannot create '{}'", tmp);
  uint64_t len = json.size();
  bool ok = std::fwrite(&len, 8, 1, f) == 1 && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  for (const SafetensorsTensor& t : tensors)
    ok = ok && (t.nbytes == 0 || std::fwrite(t.data, 1, t.nbytes, f) == t.nbytes);
  ok = (std::fclose(f) == 0) && ok;
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    return IoError("{}: write failed (disk full?)", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return IoError("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
  return Status::Ok();
}

}  // namespace ferry::formats
