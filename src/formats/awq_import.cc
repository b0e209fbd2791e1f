#include "formats/awq_import.h"

#include <cstring>
#include <map>

#include "formats/hf_names.h"

namespace ferry::formats {
namespace {

constexpr std::string_view kQweight = ".qweight";

// Nibble of column `col` in a packed int32 row: slot k with kAwqOrder[k] == col % 8.
inline int Nibble(const int32_t* row, int64_t col) {
  static constexpr int kSlot[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // inverse of kAwqOrder
  const auto word = static_cast<uint32_t>(row[col / 8]);
  return static_cast<int>((word >> (4 * kSlot[col % 8])) & 0xF);
}

}  // namespace

Status ImportAwqTensors(const nlohmann::json& config, const std::string& dir, LoadedWeightSource* src) {
  auto qc = config.find("quantization_config");
  if (qc == config.end() || !qc->is_object()) return Status::Ok();
  const std::string method = qc->value("quant_method", "");
  if (method != "awq")
    return UnsupportedError("{}: quantization_config.quant_method '{}' is not supported (Ferry imports awq)",
                            dir, method);
  const int64_t bits = qc->value("bits", qc->value("w_bit", int64_t{0}));
  const int64_t group = qc->value("group_size", qc->value("q_group_size", int64_t{0}));
  const std::string version = qc->value("version", "gemm");
  if (bits != 4 || (version != "gemm" && version != "GEMM") || !(group == 32 || group == 64 || group == 128))
    return UnsupportedError(
        "{}: AWQ bits {} version '{}' group_size {}: Ferry imports 4-bit GEMM with group 32, 64 or 128", dir,
        bits, version, group);
  const DType type = group == 32 ? DType::kI4G32 : group == 64 ? DType::kI4G64 : DType::kI4G128;

  std::vector<TensorRef>& tensors = src->mutable_tensors();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index[tensors[i].name] = i;
  std::vector<bool> drop(tensors.size(), false);
  std::vector<TensorRef> added;
  for (const auto& [name, qi] : index) {
    if (name.size() <= kQweight.size() ||
        name.compare(name.size() - kQweight.size(), kQweight.size(), kQweight) != 0)
      continue;
    const std::string base = name.substr(0, name.size() - kQweight.size());
    auto zi = index.find(base + ".qzeros"), si = index.find(base + ".scales");
    if (zi == index.end() || si == index.end())
      return CorruptFileError("{}: '{}' has no matching .qzeros/.scales", dir, name);
    const TensorRef &qw = tensors[qi], &qz = tensors[zi->second], &sc = tensors[si->second];
    if (qw.dtype != DType::kI32 || qz.dtype != DType::kI32 || sc.dtype != DType::kF16 ||
        qw.shape.size() != 2 || qz.shape.size() != 2 || sc.shape.size() != 2)
      return CorruptFileError("{}: '{}': expected int32 qweight/qzeros and fp16 scales, all 2-D", dir, base);
    const int64_t n_in = qw.shape[0], n_out = qw.shape[1] * 8, ng = n_in / group;
    if (n_in % group != 0 || qz.shape != std::vector<int64_t>{ng, n_out / 8} ||
        sc.shape != std::vector<int64_t>{ng, n_out})
      return CorruptFileError("{}: '{}': shapes qweight {} qzeros {} scales {} do not fit group_size {}", dir,
                              base, qw.ShapeString(), qz.ShapeString(), sc.ShapeString(), group);
    const size_t gb = 4 + static_cast<size_t>(group) / 2, row_bytes = static_cast<size_t>(ng) * gb;
    auto* out = static_cast<uint8_t*>(
        src->AllocateOwned(row_bytes * static_cast<size_t>(n_out)));  // [n_out, n_in] int4
    if (!out) return ResourceExhaustedError("{}: out of memory importing '{}'", dir, base);
    // The mapped data may be unaligned (safetensors header length is arbitrary): copy rows.
    std::vector<int32_t> qrow(static_cast<size_t>(n_out / 8)), zrow(qrow.size());
    std::vector<uint16_t> srow(static_cast<size_t>(n_out));
    std::vector<uint8_t> nib(static_cast<size_t>(n_out * n_in));  // [n_out, n_in] q
    for (int64_t i = 0; i < n_in; ++i) {
      std::memcpy(qrow.data(),
                  static_cast<const uint8_t*>(qw.data) + static_cast<size_t>(i) * qrow.size() * 4,
                  qrow.size() * 4);
      for (int64_t o = 0; o < n_out; ++o)
        nib[static_cast<size_t>(o * n_in + i)] = static_cast<uint8_t>(Nibble(qrow.data(), o));
    }
    for (int64_t g = 0; g < ng; ++g) {
      std::memcpy(zrow.data(),
                  static_cast<const uint8_t*>(qz.data) + static_cast<size_t>(g) * zrow.size() * 4,
                  zrow.size() * 4);
      std::memcpy(srow.data(),
                  static_cast<const uint8_t*>(sc.data) + static_cast<size_t>(g) * srow.size() * 2,
                  srow.size() * 2);
      for (int64_t o = 0; o < n_out; ++o) {
        uint8_t* dst = out + static_cast<size_t>(o) * row_bytes + static_cast<size_t>(g) * gb;
        std::memcpy(dst, &srow[static_cast<size_t>(o)], 2);
        dst[2] = static_cast<uint8_t>(Nibble(zrow.data(), o));
        dst[3] = 0;
        const uint8_t* q = nib.data() + o * n_in + g * group;
        for (int64_t k = 0; k < group / 32; ++k)
          for (int j = 0; j < 16; ++j)
            dst[4 + 16 * k + j] = static_cast<uint8_t>(q[32 * k + j] | (q[32 * k + 16 + j] << 4));
      }
    }
    TensorRef t;
    t.name = HfToGgufTensorName(base + ".weight");
    t.dtype = type;
    t.shape = {n_out, n_in};
    t.data = out;
    t.nbytes = row_bytes * static_cast<size_t>(n_out);
    added.push_back(std::move(t));
    drop[qi] = drop[zi->second] = drop[si->second] = true;
  }
  std::vector<TensorRef> kept;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(tensors[i]));
  for (TensorRef& t : added) kept.push_back(std::move(t));
  tensors = std::move(kept);
  return Status::Ok();
}

}  // namespace ferry::formats
