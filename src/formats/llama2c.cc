// llama2.c checkpoints (legacy, version 1, version 2 / Q8 groups) mapped to GGUF names and
// metadata. Orders follow karpathy/llama2.c export.py (legacy_export, version1_export,
// version2_export) and run.c's memory_map_weights.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "formats/byte_reader.h"
#include "formats/loaded_source.h"

namespace ferry::formats {
namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42" as a little-endian uint32
constexpr size_t kVersionedHeaderBytes = 256;

struct Llama2cConfig {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared_classifier;
  int32_t group_size = 0;  // version 2 only
};

struct Slot {
  std::string name;
  std::vector<int64_t> shape;  // outermost first
  bool quantized;              // version 2: int8 + f32 group scales
  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

Status Validate(const Llama2cConfig& c, const std::string& path, const char* layout) {
  auto bad = [&](const char* why) {
    return CorruptFileError(
        "{}: not a valid llama2.c {} checkpoint ({}): header dim={} hidden_dim={} n_layers={} n_heads={} "
        "n_kv_heads={} vocab_size={} seq_len={}; if this is not a llama2.c file, Ferry reads GGUF files, "
        "Hugging Face folders and llama2.c .bin checkpoints",
        path, layout, why, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len);
  };
  constexpr int32_t kMaxDim = 1 << 20, kMaxVocab = 1 << 24;
  if (c.dim <= 0 || c.dim > kMaxDim || c.hidden_dim <= 0 || c.hidden_dim > kMaxDim || c.n_layers <= 0 ||
      c.n_layers > 4096 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.vocab_size <= 0 ||
      c.vocab_size > kMaxVocab || c.seq_len <= 0 || c.seq_len > kMaxVocab)
    return bad("a field is out of range");
  if (c.dim % c.n_heads != 0) return bad("dim is not a multiple of n_heads");
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0)
    return bad("n_heads is not a multiple of n_kv_heads");
  if ((c.dim / c.n_heads) % 2 != 0) return bad("head size is odd");
  return Status::Ok();
}

void AddPerLayer(std::vector<Slot>* slots, const Llama2cConfig& c, const char* name,
                 std::vector<int64_t> shape, bool quantized) {
  for (int32_t l = 0; l < c.n_layers; ++l)
    slots->push_back({"blk." + std::to_string(l) + "." + name + ".weight", shape, quantized});
}

// The tensors in file order for each layout (legacy adds the freq_cis tables, skipped).
std::vector<Slot> Layout(const Llama2cConfig& c, int version) {
  const int64_t dim = c.dim, hidden = c.hidden_dim, vocab = c.vocab_size;
  const int64_t kv_dim = dim / c.n_heads * c.n_kv_heads;
  const bool q = version == 2;
  std::vector<Slot> s;
  if (version == 0) {
    s.push_back({"token_embd.weight", {vocab, dim}, false});
    AddPerLayer(&s, c, "attn_norm", {dim}, false);
    AddPerLayer(&s, c, "attn_q", {dim, dim}, false);
    AddPerLayer(&s, c, "attn_k", {kv_dim, dim}, false);
    AddPerLayer(&s, c, "attn_v", {kv_dim, dim}, false);
    AddPerLayer(&s, c, "attn_output", {dim, dim}, false);
    AddPerLayer(&s, c, "ffn_norm", {dim}, false);
    AddPerLayer(&s, c, "ffn_gate", {hidden, dim}, false);  // w1
    AddPerLayer(&s, c, "ffn_down", {dim, hidden}, false);  // w2
    AddPerLayer(&s, c, "ffn_up", {hidden, dim}, false);    // w3
    s.push_back({"output_norm.weight", {dim}, false});
    const int64_t half = dim / c.n_heads / 2;
    s.push_back({"", {c.seq_len, half}, false});  // freq_cis_real (unused: Ferry computes RoPE)
    s.push_back({"", {c.seq_len, half}, false});  // freq_cis_imag
  } else {
    AddPerLayer(&s, c, "attn_norm", {dim}, false);
    AddPerLayer(&s, c, "ffn_norm", {dim}, false);
    s.push_back({"output_norm.weight", {dim}, false});
    s.push_back({"token_embd.weight", {vocab, dim}, q});
    AddPerLayer(&s, c, "attn_q", {dim, dim}, q);
    AddPerLayer(&s, c, "attn_k", {kv_dim, dim}, q);
    AddPerLayer(&s, c, "attn_v", {kv_dim, dim}, q);
    AddPerLayer(&s, c, "attn_output", {dim, dim}, q);
    AddPerLayer(&s, c, "ffn_gate", {hidden, dim}, q);
    AddPerLayer(&s, c, "ffn_down", {dim, hidden}, q);
    AddPerLayer(&s, c, "ffn_up", {hidden, dim}, q);
  }
  if (!c.shared_classifier) s.push_back({"output.weight", {vocab, dim}, q});
  return s;
}

uint64_t SlotBytes(const Slot& s, int32_t group_size) {
  const uint64_t n = s.numel();
  return s.quantized ? n + n / static_cast<uint64_t>(group_size) * 4 : n * 4;
}

uint64_t ExpectedSize(const std::vector<Slot>& slots, uint64_t header, int32_t group_size) {
  uint64_t total = header;
  for (const Slot& s : slots) total += SlotBytes(s, group_size);
  return total;
}

void SetMetadata(const Llama2cConfig& c, const std::string& path, const char* format, Metadata* m) {
  using Type = MetaValue::Type;
  auto u32 = [&](const char* key, int64_t v) {
    m->Set(key, MetaValue::Uint(static_cast<uint64_t>(v), Type::kU32));
  };
  m->SetString("general.architecture", "llama");
  m->SetString("general.name", std::filesystem::path(path).stem().string());
  u32("llama.context_length", c.seq_len);
  u32("llama.embedding_length", c.dim);
  u32("llama.block_count", c.n_layers);
  u32("llama.feed_forward_length", c.hidden_dim);
  u32("llama.attention.head_count", c.n_heads);
  u32("llama.attention.head_count_kv", c.n_kv_heads);
  m->SetFloat("llama.attention.layer_norm_rms_epsilon", 1e-5);
  m->SetFloat("llama.rope.freq_base", 10000.0);
  u32("llama.rope.dimension_count", c.dim / c.n_heads);
  u32("llama.vocab_size", c.vocab_size);
  m->SetString("ferry.source.format", format);
}

}  // namespace

StatusOr<std::unique_ptr<WeightSource>> OpenLlama2c(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto src = std::make_unique<LoadedWeightSource>(path);
  const MappedFile& f = src->KeepFile(std::move(file));
  ByteReader r(f.data(), f.size(), src->path());

  Llama2cConfig c{};
  int version = 0;
  uint64_t header = 28;
  uint32_t magic = 0;
  if (f.size() >= 4) std::memcpy(&magic, f.data(), 4);
  if (magic == kMagic) {
    if (f.size() < kVersionedHeaderBytes)
      return CorruptFileError("{}: llama2.c header ('ak42' magic) needs {} bytes but the file has {}; {}",
                              path, kVersionedHeaderBytes, f.size(), "the file is truncated");
    int32_t v = 0;
    FERRY_RETURN_IF_ERROR(r.Skip(4, "magic"));
    FERRY_RETURN_IF_ERROR(r.Read(&v, "version"));
    if (v != 1 && v != 2)
      return UnsupportedError("{}: llama2.c checkpoint version {} is not supported (versions 1 and 2 are)",
                              path, v);
    version = v;
    header = kVersionedHeaderBytes;
  } else if (f.size() < 28) {
    return CorruptFileError(
        "{}: {} bytes is too small for a model file (not GGUF, not a llama2.c checkpoint)", path, f.size());
  }
  for (int32_t* field :
       {&c.dim, &c.hidden_dim, &c.n_layers, &c.n_heads, &c.n_kv_heads, &c.vocab_size, &c.seq_len})
    FERRY_RETURN_IF_ERROR(r.Read(field, "header"));
  const char* format = "llama2c-legacy";
  if (version == 0) {
    c.shared_classifier = c.vocab_size > 0;  // run.c: negative vocab_size = separate classifier
    if (c.vocab_size < 0 && c.vocab_size != INT32_MIN) c.vocab_size = -c.vocab_size;
  } else {
    uint8_t shared = 0;
    FERRY_RETURN_IF_ERROR(r.Read(&shared, "shared_classifier"));
    c.shared_classifier = shared != 0;
    format = "llama2c-v1";
    if (version == 2) {
      FERRY_RETURN_IF_ERROR(r.Read(&c.group_size, "group_size"));
      format = "llama2c-v2";
    }
  }
  FERRY_RETURN_IF_ERROR(Validate(c, path, format));
  const std::vector<Slot> slots = Layout(c, version);
  if (version == 2) {
    if (c.group_size <= 0 || c.group_size > (1 << 20))
      return CorruptFileError("{}: llama2.c version 2 group_size {} is out of range", path, c.group_size);
    for (const Slot& s : slots)
      if (s.quantized && s.numel() % static_cast<uint64_t>(c.group_size) != 0)
        return CorruptFileError("{}: tensor '{}' has {} elements, not a multiple of group_size {}", path,
                                s.name, s.numel(), c.group_size);
  }
  const uint64_t expected = ExpectedSize(slots, header, c.group_size);
  if (expected != f.size())
    return CorruptFileError(
        "{}: size {} does not match the {} layout for dim={} hidden_dim={} n_layers={} n_heads={} "
        "n_kv_heads={} "
        "vocab_size={} seq_len={} {}classifier (expected {} bytes); the file is truncated, or not a llama2.c "
        "checkpoint (Ferry reads GGUF files, Hugging Face folders and llama2.c .bin checkpoints)",
        path, f.size(), format, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
        c.seq_len, c.shared_classifier ? "shared " : "separate ", expected);

  SetMetadata(c, path, format, &src->mutable_metadata());
  uint64_t pos = header;
  for (const Slot& s : slots) {
    const uint64_t bytes = SlotBytes(s, c.group_size);
    const uint8_t* p = f.data() + pos;
    pos += bytes;
    if (s.name.empty()) continue;
    TensorRef ref;
    ref.name = s.name;
    ref.dtype = DType::kF32;
    ref.shape = s.shape;
    ref.nbytes = static_cast<size_t>(s.numel() * 4);
    if (!s.quantized) {
      ref.data = p;  // zero copy
    } else {
      // int8 values [numel], then f32 scales [numel / group_size] over the flattened tensor.
      auto* out = static_cast<float*>(src->AllocateOwned(ref.nbytes));
      if (!out) return ResourceExhaustedError("{}: out of memory dequantizing '{}'", path, s.name);
      const size_t n = static_cast<size_t>(s.numel());
      const auto* q = reinterpret_cast<const int8_t*>(p);
      const uint8_t* scales = p + n;
      for (size_t g = 0; g < n / static_cast<size_t>(c.group_size); ++g) {
        float scale = 0;
        std::memcpy(&scale, scales + g * 4, 4);
        for (size_t k = g * c.group_size; k < (g + 1) * c.group_size; ++k) out[k] = q[k] * scale;
      }
      ref.data = out;
    }
    src->mutable_tensors().push_back(std::move(ref));
  }
  return std::unique_ptr<WeightSource>(std::move(src));
}

}  // namespace ferry::formats
