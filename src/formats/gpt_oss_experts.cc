#include "formats/gpt_oss_experts.h"

#include <cctype>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::formats {
namespace {

constexpr std::string_view kPrefix = "model.layers.";
constexpr std::string_view kExperts = ".mlp.experts.";
constexpr int64_t kMxfp4Block = 32;
constexpr size_t kMxfp4BlockBytes = 17;  // e8m0 scale + 16 bytes of nibbles

// "model.layers.N.mlp.experts.SUFFIX" -> (N, SUFFIX), else false.
bool SplitName(const std::string& name, std::string* layer, std::string* suffix) {
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  size_t d = kPrefix.size();
  while (d < name.size() && std::isdigit(static_cast<unsigned char>(name[d]))) ++d;
  if (d == kPrefix.size() || d - kPrefix.size() > 9 || name.compare(d, kExperts.size(), kExperts) != 0)
    return false;
  *layer = name.substr(kPrefix.size(), d - kPrefix.size());
  *suffix = name.substr(d + kExperts.size());
  return true;
}

size_t FloatBytes(DType t) {
  return t == DType::kF32 ? 4 : (t == DType::kF16 || t == DType::kBF16) ? 2 : 0;
}

class LayerImport {
 public:
  LayerImport(const std::string& dir, const std::string& layer, LoadedWeightSource* src)
      : dir_(dir), layer_(layer), src_(src) {}

  // parts: suffix -> the HF tensor. Appends llama.cpp's tensors to `out`.
  Status Run(const std::map<std::string, const TensorRef*>& parts, std::vector<TensorRef>* out) {
    for (const auto& [suffix, t] : parts) {
      static constexpr std::string_view kKnown[] = {
          "gate_up_proj",        "gate_up_proj_bias",   "down_proj",        "down_proj_bias",
          "gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks", "down_proj_scales"};
      bool known = false;
      for (std::string_view k : kKnown) known = known || suffix == k;
      if (!known)
        return UnsupportedError("{}: tensor '{}' is not one of gpt-oss's expert parameters", dir_, t->name);
    }
    auto get = [&](const char* s) -> const TensorRef* {
      auto it = parts.find(s);
      return it == parts.end() ? nullptr : it->second;
    };
    if (const TensorRef* gu = get("gate_up_proj")) {
      FERRY_RETURN_IF_ERROR(FloatGateUp(*gu, out));
    } else if (get("gate_up_proj_blocks") || get("gate_up_proj_scales")) {
      FERRY_RETURN_IF_ERROR(
          Mxfp4(get("gate_up_proj_blocks"), get("gate_up_proj_scales"), "gate_up_proj", out));
    } else {
      return CorruptFileError("{}: layer {} has expert tensors but no mlp.experts.gate_up_proj(_blocks)",
                              dir_, layer_);
    }
    if (const TensorRef* down = get("down_proj")) {
      FERRY_RETURN_IF_ERROR(FloatDown(*down, out));
    } else if (get("down_proj_blocks") || get("down_proj_scales")) {
      FERRY_RETURN_IF_ERROR(Mxfp4(get("down_proj_blocks"), get("down_proj_scales"), "down_proj", out));
    } else {
      return CorruptFileError("{}: layer {} has no mlp.experts.down_proj(_blocks)", dir_, layer_);
    }
    if (const TensorRef* b = get("gate_up_proj_bias")) FERRY_RETURN_IF_ERROR(SplitBias(*b, out));
    if (const TensorRef* b = get("down_proj_bias")) {
      TensorRef r = *b;
      r.name = Name("down", "bias");
      out->push_back(std::move(r));
    }
    return Status::Ok();
  }

 private:
  std::string Name(const char* which, const char* kind) const {
    return "blk." + layer_ + ".ffn_" + which + "_exps." + kind;
  }

  Status CheckFloat(const TensorRef& t, size_t rank) const {
    const size_t es = FloatBytes(t.dtype);
    if (es == 0)
      return UnsupportedError("{}: tensor '{}' has type {} (f32, f16 or bf16 expected)", dir_, t.name,
                              DTypeName(t.dtype));
    if (t.shape.size() != rank)
      return CorruptFileError("{}: tensor '{}' has shape {} ({} dimensions expected)", dir_, t.name,
                              t.ShapeString(), rank);
    if (t.nbytes != static_cast<size_t>(t.NumElements()) * es)
      return CorruptFileError("{}: tensor '{}' holds {} bytes for shape {}", dir_, t.name, t.nbytes,
                              t.ShapeString());
    return Status::Ok();
  }

  StatusOr<uint8_t*> Allocate(const std::string& name, size_t nbytes) {
    auto* p = static_cast<uint8_t*>(src_->AllocateOwned(nbytes));
    if (!p) return ResourceExhaustedError("{}: out of memory for '{}' ({} bytes)", dir_, name, nbytes);
    return p;
  }

  TensorRef Ref(std::string name, DType dtype, std::vector<int64_t> shape, const void* data, size_t nbytes) {
    TensorRef r;
    r.name = std::move(name);
    r.dtype = dtype;
    r.shape = std::move(shape);
    r.data = data;
    r.nbytes = nbytes;
    return r;
  }

  // [E, dim, 2F] (x @ W, gate/up interleaved in the last dim) -> gate and up [E, F, dim].
  Status FloatGateUp(const TensorRef& t, std::vector<TensorRef>* out) {
    FERRY_RETURN_IF_ERROR(CheckFloat(t, 3));
    const int64_t E = t.shape[0], dim = t.shape[1], two_f = t.shape[2];
    if (two_f % 2 != 0)
      return CorruptFileError(
          "{}: tensor '{}' has shape {}: its last dimension (gate and up interleaved) is odd", dir_, t.name,
          t.ShapeString());
    const int64_t F = two_f / 2;
    const size_t es = FloatBytes(t.dtype), nbytes = static_cast<size_t>(E * F * dim) * es;
    const auto* in = static_cast<const uint8_t*>(t.data);
    for (int half = 0; half < 2; ++half) {
      const std::string name = Name(half == 0 ? "gate" : "up", "weight");
      FERRY_ASSIGN_OR_RETURN(uint8_t * w, Allocate(name, nbytes));  // [E, F, dim]
      for (int64_t e = 0; e < E; ++e)
        for (int64_t j = 0; j < F; ++j)
          for (int64_t d = 0; d < dim; ++d)
            std::memcpy(w + static_cast<size_t>((e * F + j) * dim + d) * es,
                        in + static_cast<size_t>((e * dim + d) * two_f + 2 * j + half) * es, es);
      out->push_back(Ref(name, t.dtype, {E, F, dim}, w, nbytes));
    }
    return Status::Ok();
  }

  // [E, F, dim] -> [E, dim, F].
  Status FloatDown(const TensorRef& t, std::vector<TensorRef>* out) {
    FERRY_RETURN_IF_ERROR(CheckFloat(t, 3));
    const int64_t E = t.shape[0], F = t.shape[1], dim = t.shape[2];
    const size_t es = FloatBytes(t.dtype), nbytes = t.nbytes;
    const std::string name = Name("down", "weight");
    FERRY_ASSIGN_OR_RETURN(uint8_t * w, Allocate(name, nbytes));  // [E, dim, F]
    const auto* in = static_cast<const uint8_t*>(t.data);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t d = 0; d < dim; ++d)
        for (int64_t j = 0; j < F; ++j)
          std::memcpy(w + static_cast<size_t>((e * dim + d) * F + j) * es,
                      in + static_cast<size_t>((e * F + j) * dim + d) * es, es);
    out->push_back(Ref(name, t.dtype, {E, dim, F}, w, nbytes));
    return Status::Ok();
  }

  // [E, 2F] interleaved -> gate and up [E, F].
  Status SplitBias(const TensorRef& t, std::vector<TensorRef>* out) {
    FERRY_RETURN_IF_ERROR(CheckFloat(t, 2));
    const int64_t E = t.shape[0], two_f = t.shape[1];
    if (two_f % 2 != 0)
      return CorruptFileError("{}: tensor '{}' has shape {}: its last dimension is odd", dir_, t.name,
                              t.ShapeString());
    const int64_t F = two_f / 2;
    const size_t es = FloatBytes(t.dtype), nbytes = static_cast<size_t>(E * F) * es;
    const auto* in = static_cast<const uint8_t*>(t.data);
    for (int half = 0; half < 2; ++half) {
      const std::string name = Name(half == 0 ? "gate" : "up", "bias");
      FERRY_ASSIGN_OR_RETURN(uint8_t * b, Allocate(name, nbytes));  // [E, F]
      for (int64_t i = 0; i < E * F; ++i)
        std::memcpy(b + static_cast<size_t>(i) * es, in + static_cast<size_t>(2 * i + half) * es, es);
      out->push_back(Ref(name, t.dtype, {E, F}, b, nbytes));
    }
    return Status::Ok();
  }

  // blocks [E, R, nb, 16] + scales [E, R, nb] (u8) -> MXFP4 [E, R', nb * 32]: for gate_up, R' = R / 2
  // rows each (even rows gate, odd rows up); for down, all R rows.
  Status Mxfp4(const TensorRef* blocks, const TensorRef* scales, const char* what,
               std::vector<TensorRef>* out) {
    if (!blocks || !scales)
      return CorruptFileError("{}: layer {} has only one of mlp.experts.{}_blocks and {}_scales", dir_,
                              layer_, what, what);
    if (blocks->dtype != DType::kU8 || scales->dtype != DType::kU8)
      return UnsupportedError("{}: tensors '{}' and '{}' must be U8 (openai's MXFP4 blocks and e8m0 scales)",
                              dir_, blocks->name, scales->name);
    const auto& bs = blocks->shape;
    const auto& ss = scales->shape;
    if (bs.size() != 4 || bs[3] != 16 || ss.size() != 3 || ss[0] != bs[0] || ss[1] != bs[1] || ss[2] != bs[2])
      return CorruptFileError(
          "{}: '{}' has shape {} and '{}' shape {}: expected [E, rows, blocks, 16] and [E, rows, blocks]",
          dir_, blocks->name, blocks->ShapeString(), scales->name, scales->ShapeString());
    if (blocks->nbytes != static_cast<size_t>(blocks->NumElements()) ||
        scales->nbytes != static_cast<size_t>(scales->NumElements()))
      return CorruptFileError("{}: '{}' or '{}' holds the wrong number of bytes for its shape", dir_,
                              blocks->name, scales->name);
    const int64_t E = bs[0], R = bs[1], nb = bs[2];
    const bool gate_up = std::string_view(what) == "gate_up_proj";
    if (gate_up && R % 2 != 0)
      return CorruptFileError("{}: '{}' has an odd number of rows ({}): gate and up rows alternate", dir_,
                              blocks->name, R);
    const int64_t rows = gate_up ? R / 2 : R;
    const size_t nbytes = static_cast<size_t>(E * rows * nb) * kMxfp4BlockBytes;
    const auto* q = static_cast<const uint8_t*>(blocks->data);
    const auto* s = static_cast<const uint8_t*>(scales->data);
    for (int half = 0; half < (gate_up ? 2 : 1); ++half) {
      const std::string name = Name(gate_up ? (half == 0 ? "gate" : "up") : "down", "weight");
      FERRY_ASSIGN_OR_RETURN(uint8_t * w, Allocate(name, nbytes));  // [E, rows, nb] blocks of 17 B
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t src_row = gate_up ? 2 * r + half : r;
          for (int64_t b = 0; b < nb; ++b) {
            const int64_t in_block = (e * R + src_row) * nb + b;
            uint8_t* o = w + static_cast<size_t>((e * rows + r) * nb + b) * kMxfp4BlockBytes;
            const uint8_t* in = q + static_cast<size_t>(in_block) * 16;
            auto elem = [&](int k) { return (k % 2 == 0 ? in[k / 2] : in[k / 2] >> 4) & 0x0F; };
            o[0] = s[in_block];
            for (int j = 0; j < 16; ++j) o[1 + j] = static_cast<uint8_t>(elem(j) | elem(j + 16) << 4);
          }
        }
      out->push_back(Ref(name, DType::kMXFP4, {E, rows, nb * kMxfp4Block}, w, nbytes));
    }
    return Status::Ok();
  }

  const std::string& dir_;
  const std::string layer_;
  LoadedWeightSource* src_;
};

}  // namespace

Status ImportGptOssExperts(const std::string& dir, LoadedWeightSource* src) {
  std::vector<TensorRef>& tensors = src->mutable_tensors();
  std::map<std::string, std::map<std::string, const TensorRef*>> layers;  // layer -> suffix -> tensor
  std::vector<bool> consumed(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string layer, suffix;
    if (!SplitName(tensors[i].name, &layer, &suffix)) continue;
    layers[layer][suffix] = &tensors[i];
    consumed[i] = true;
  }
  std::vector<TensorRef> added;
  for (const auto& [layer, parts] : layers)
    FERRY_RETURN_IF_ERROR(LayerImport(dir, layer, src).Run(parts, &added));
  std::vector<TensorRef> kept;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!consumed[i]) kept.push_back(std::move(tensors[i]));
  for (TensorRef& t : added) kept.push_back(std::move(t));
  tensors = std::move(kept);
  return Status::Ok();
}

}  // namespace ferry::formats
