// WeightSource: a model file (GGUF, Hugging Face folder, llama2.c checkpoint) seen as
// metadata + named tensors. Every loader normalizes to GGUF conventions so the model layer
// has one description to build from:
//   - metadata keys as GGUF writes them ("general.architecture", "llama.block_count",
//     "llama.attention.head_count_kv", "tokenizer.ggml.tokens", ...);
//   - tensor names as llama.cpp writes them ("token_embd.weight", "blk.3.attn_q.weight",
//     "output_norm.weight", "output.weight", ...);
//   - shapes outermost first: a linear weight is {n_out, n_in} with n_in contiguous
//     (GGUF's ne[] reversed; safetensors' shape as is).
// Extra keys Ferry adds:
//   "ferry.rope.neox" (bool): q/k rows are in HF rotate-half order, use neox-style RoPE.
//   "ferry.source.format" (string): "gguf v3" / "gguf v2", "safetensors", "llama2c-legacy",
//     "llama2c-v1", "llama2c-v2".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/dtype.h"
#include "core/metadata.h"

namespace ferry::formats {

struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first
  const void* data = nullptr;  // into the mapped file, or into storage the source owns
  size_t nbytes = 0;

  int64_t NumElements() const;
  // "[2048, 32000]"
  std::string ShapeString() const;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  WeightSource() = default;
  WeightSource(const WeightSource&) = delete;
  WeightSource& operator=(const WeightSource&) = delete;

  const Metadata& metadata() const { return metadata_; }
  Metadata& mutable_metadata() { return metadata_; }
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  // nullptr if absent.
  const TensorRef* FindTensor(std::string_view name) const;
  const std::string& path() const { return path_; }
  // Total bytes of tensor data.
  size_t TensorBytes() const;

 protected:
  Metadata metadata_;
  std::vector<TensorRef> tensors_;
  std::string path_;
};

// Detects the format: a directory is a Hugging Face folder; "GGUF" magic is GGUF; otherwise
// a llama2.c checkpoint. Errors name the file and what is wrong.
StatusOr<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& path);

StatusOr<std::unique_ptr<WeightSource>> OpenGguf(const std::string& path);
StatusOr<std::unique_ptr<WeightSource>> OpenHuggingFaceFolder(const std::string& dir);
// llama2.c legacy (28-byte header), version 1 (f32) or version 2 (q8 groups, dequantized to
// f32 at load because its groups straddle rows). The tokenizer .bin beside it is loaded by the
// tokenizer layer (LoadLlama2cTokenizer), not here: formats depends on core only.
StatusOr<std::unique_ptr<WeightSource>> OpenLlama2c(const std::string& path);

}  // namespace ferry::formats
