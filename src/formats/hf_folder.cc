// Hugging Face model folder: config.json + model.safetensors (or index-listed shards), each
// shard mmapped and kept alive by the source; tensors renamed to llama.cpp's names.
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "core/fp16.h"
#include "formats/awq_import.h"
#include "formats/deepseek_mla.h"
#include "formats/gpt_oss_experts.h"
#include "formats/hf_config.h"
#include "formats/hf_names.h"
#include "formats/loaded_source.h"
#include "formats/safetensors.h"

namespace ferry::formats {
namespace {

namespace fs = std::filesystem;

StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  const char* begin = reinterpret_cast<const char*>(file.data());
  nlohmann::json j = nlohmann::json::parse(begin, begin + file.size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("{}: not valid JSON", path);
  return j;
}

// Shard file names in first-seen order, checking each weight_map entry names a plain file.
Status ReadShardList(const std::string& index_path, std::vector<std::string>* shards,
                     std::unordered_map<std::string, std::string>* weight_map) {
  FERRY_ASSIGN_OR_RETURN(nlohmann::json index, ReadJson(index_path));
  auto it = index.find("weight_map");
  if (!index.is_object() || it == index.end() || !it->is_object())
    return CorruptFileError("{}: missing \"weight_map\" object", index_path);
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string())
      return CorruptFileError("{}: weight_map['{}'] is not a string", index_path, e.key());
    std::string file = e.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "..")
      return CorruptFileError("{}: weight_map['{}'] = '{}' is not a file name in the folder", index_path,
                              e.key(), file);
    if (weight_map->find(file) == weight_map->end()) {
      bool seen = false;
      for (const auto& s : *shards) seen = seen || s == file;
      if (!seen) shards->push_back(file);
    }
    (*weight_map)[e.key()] = file;
  }
  return Status::Ok();
}

// Gemma's norms multiply by (1 + w) and store w; GGUFs (llama.cpp's converter) store 1 + w,
// which the forward pass reads as a plain RMSNorm weight. Every "*norm.weight" tensor becomes
// an owned f32 copy with `shift` added.
Status ShiftNormWeights(const std::string& dir, float shift, LoadedWeightSource* src) {
  for (TensorRef& t : src->mutable_tensors()) {
    if (!t.name.ends_with("norm.weight")) continue;
    const int64_t n = t.NumElements();
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
      return UnsupportedError("{}: norm tensor '{}' has type {} (f32, f16 or bf16 expected)", dir, t.name,
                              DTypeName(t.dtype));
    if (t.nbytes != static_cast<size_t>(n) * (t.dtype == DType::kF32 ? 4 : 2))
      return CorruptFileError("{}: tensor '{}' holds {} bytes for {} elements", dir, t.name, t.nbytes, n);
    auto* out = static_cast<float*>(src->AllocateOwned(static_cast<size_t>(n) * sizeof(float)));  // [n]
    if (!out) return ResourceExhaustedError("{}: out of memory for '{}'", dir, t.name);
    for (int64_t i = 0; i < n; ++i) {
      float v;
      if (t.dtype == DType::kF32) {
        std::memcpy(&v, static_cast<const uint8_t*>(t.data) + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, static_cast<const uint8_t*>(t.data) + 2 * i, 2);
        v = t.dtype == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
      out[i] = v + shift;
    }
    t.dtype = DType::kF32;
    t.data = out;
    t.nbytes = static_cast<size_t>(n) * sizeof(float);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<WeightSource>> OpenHuggingFaceFolder(const std::string& dir) {
  auto src = std::make_unique<LoadedWeightSource>(dir);
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path))
    return NotFoundError(
        "{}: no config.json (a Hugging Face model folder needs config.json and "
        "model.safetensors)",
        dir);
  FERRY_ASSIGN_OR_RETURN(nlohmann::json config, ReadJson(config_path));
  HfConfigResult cfg;
  std::string default_name = fs::path(dir).filename().string();
  if (default_name.empty()) default_name = fs::path(dir).parent_path().filename().string();
  try {
    FERRY_RETURN_IF_ERROR(
        HfConfigToMetadata(config, config_path, default_name, &src->mutable_metadata(), &cfg));
  } catch (const std::exception& e) {
    return InvalidArgumentError("{}: unexpected value type in config: {}", config_path, e.what());
  }

  // Which files hold the weights.
  std::vector<std::string> shards;
  std::unordered_map<std::string, std::string> weight_map;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  if (fs::exists(index_path)) {
    try {
      FERRY_RETURN_IF_ERROR(ReadShardList(index_path, &shards, &weight_map));
    } catch (const std::exception& e) {
      return CorruptFileError("{}: {}", index_path, e.what());
    }
  } else if (fs::exists(fs::path(dir) / "model.safetensors")) {
    shards.push_back("model.safetensors");
  } else {
    return NotFoundError(
        "{}: no model.safetensors or model.safetensors.index.json (PyTorch .bin weights are not "
        "supported; convert them to safetensors)",
        dir);
  }

  std::map<std::string, std::string> seen;  // gguf name -> hf name, to catch collisions
  std::vector<TensorRef>& tensors = src->mutable_tensors();
  for (const std::string& shard : shards) {
    const std::string shard_path = (fs::path(dir) / shard).string();
    FERRY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(shard_path));
    const MappedFile& kept = src->KeepFile(std::move(file));
    FERRY_ASSIGN_OR_RETURN(std::vector<SafetensorsTensor> st,
                           ParseSafetensors(kept.data(), kept.size(), shard_path));
    for (SafetensorsTensor& t : st) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        if (it == weight_map.end() || it->second != shard) continue;  // the index decides which copy counts
        weight_map.erase(it);
      }
      TensorRef ref;
      ref.name = HfToGgufTensorName(t.name, cfg.arch);
      if (auto [it, inserted] = seen.emplace(ref.name, t.name); !inserted)
        return CorruptFileError("{}: tensors '{}' and '{}' both map to '{}'", dir, it->second, t.name,
                                ref.name);
      ref.dtype = t.dtype;
      ref.shape = std::move(t.shape);
      ref.data = t.data;
      ref.nbytes = t.nbytes;
      tensors.push_back(std::move(ref));
    }
  }
  if (!weight_map.empty())
    return CorruptFileError(
        "{}: tensor '{}' is listed in model.safetensors.index.json under '{}' but that file does "
        "not hold it",
        dir, weight_map.begin()->first, weight_map.begin()->second);

  if (cfg.norm_shift != 0.0f) FERRY_RETURN_IF_ERROR(ShiftNormWeights(dir, cfg.norm_shift, src.get()));
  // RoPE divisors from config.json (llama3, Phi-3 LongRoPE) as the tensors a GGUF would hold.
  for (const auto& [name, values] :
       {std::pair<const char*, const std::vector<float>*>{"rope_freqs.weight", &cfg.rope_freqs},
        {"rope_factors_long.weight", &cfg.rope_factors_long},
        {"rope_factors_short.weight", &cfg.rope_factors_short}}) {
    if (values->empty()) continue;
    if (seen.count(name))
      return CorruptFileError("{}: the checkpoint already holds a '{}' tensor", dir, name);
    const size_t nbytes = values->size() * sizeof(float);
    void* storage = src->AllocateOwned(nbytes);  // [rot_dim / 2] f32
    if (!storage) return ResourceExhaustedError("{}: out of memory for {}", dir, name);
    std::memcpy(storage, values->data(), nbytes);
    TensorRef ref;
    ref.name = name;
    ref.dtype = DType::kF32;
    ref.shape = {static_cast<int64_t>(values->size())};
    ref.data = storage;
    ref.nbytes = nbytes;
    tensors.push_back(std::move(ref));
  }
  // gpt-oss's fused experts (and openai's MXFP4 blocks) -> llama.cpp's per-projection tensors.
  if (cfg.arch == "gpt-oss") FERRY_RETURN_IF_ERROR(ImportGptOssExperts(dir, src.get()));
  // DeepSeek-V2's kv_b_proj -> the per-head W_UK^T / W_UV tensors of an MLA GGUF.
  if (cfg.arch == "deepseek2") FERRY_RETURN_IF_ERROR(SplitDeepseekKvB(dir, src.get()));
  try {  // AutoAWQ checkpoints: qweight/qzeros/scales -> Ferry int4 (awq_import.h)
    auto qc = config.find("quantization_config");
    const bool mxfp4 = cfg.arch == "gpt-oss" && qc != config.end() && qc->is_object() &&
                       qc->value("quant_method", "") == "mxfp4";  // imported above
    if (!mxfp4) FERRY_RETURN_IF_ERROR(ImportAwqTensors(config, dir, src.get()));
  } catch (const std::exception& e) {
    return InvalidArgumentError("{}: unexpected value type in quantization_config: {}", config_path,
                                e.what());
  }
  src->mutable_metadata().SetString("ferry.source.format", "safetensors");
  return std::unique_ptr<WeightSource>(std::move(src));
}

}  // namespace ferry::formats
