#include "formats/deepseek_mla.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace ferry::formats {

Status SplitDeepseekKvB(const std::string& dir, LoadedWeightSource* src) {
  const Metadata& md = src->metadata();
  const auto layers = md.GetInt("deepseek2.block_count"), heads = md.GetInt("deepseek2.attention.head_count"),
             rank = md.GetInt("deepseek2.attention.kv_lora_rank"),
             kd = md.GetInt("deepseek2.attention.key_length_mla"),
             rot = md.GetInt("deepseek2.rope.dimension_count"),
             vd = md.GetInt("deepseek2.attention.value_length_mla");
  if (!layers || !heads || !rank || !kd || !rot || !vd)
    return InternalError("{}: deepseek2 metadata incomplete before splitting kv_b_proj", dir);
  const int64_t nope = *kd - *rot, rows = nope + *vd;
  constexpr int64_t kMax = int64_t{1} << 20;  // keeps every product below 2^63
  if (*heads <= 0 || *heads > kMax || *rank <= 0 || *rank > kMax || nope <= 0 || nope > kMax || *vd <= 0 ||
      *vd > kMax || *layers > kMax)
    return InvalidArgumentError(
        "{}: MLA shapes out of range (heads {}, kv_lora_rank {}, qk_nope_head_dim {}, v_head_dim {})", dir,
        *heads, *rank, nope, *vd);
  std::vector<TensorRef>& tensors = src->mutable_tensors();
  std::vector<TensorRef> added;
  for (int64_t l = 0; l < *layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto it = std::find_if(tensors.begin(), tensors.end(),
                           [&](const TensorRef& t) { return t.name == b + "attn_kv_b.weight"; });
    if (it == tensors.end()) continue;  // a missing tensor is named when the model loads
    const TensorRef kvb = *it;
    const size_t es = kvb.dtype == DType::kF32                                  ? 4
                      : (kvb.dtype == DType::kF16 || kvb.dtype == DType::kBF16) ? 2
                                                                                : 0;
    if (es == 0)
      return UnsupportedError(
          "{}: 'model.layers.{}.self_attn.kv_b_proj.weight' has type {} (f32, f16 or bf16 "
          "can be split for multi-head latent attention)",
          dir, l, DTypeName(kvb.dtype));
    if (kvb.shape != std::vector<int64_t>{*heads * rows, *rank} ||
        kvb.nbytes != static_cast<size_t>(*heads * rows * *rank) * es)
      return InvalidArgumentError(
          "{}: 'model.layers.{}.self_attn.kv_b_proj.weight' has shape {}, expected [{}, {}]", dir, l,
          kvb.ShapeString(), *heads * rows, *rank);
    const size_t half = static_cast<size_t>(*heads * nope * *rank) * es,
                 vbytes = static_cast<size_t>(*heads * *vd * *rank) * es;
    auto* kb = static_cast<uint8_t*>(src->AllocateOwned(half));    // [heads, kv_lora, nope]
    auto* vb = static_cast<uint8_t*>(src->AllocateOwned(vbytes));  // [heads, v, kv_lora]
    if (!kb || !vb) return ResourceExhaustedError("{}: out of memory splitting layer {}'s kv_b_proj", dir, l);
    const auto* in = static_cast<const uint8_t*>(kvb.data);  // [heads, nope + v, kv_lora]
    for (int64_t h = 0; h < *heads; ++h) {
      for (int64_t r = 0; r < nope; ++r)
        for (int64_t c = 0; c < *rank; ++c)
          std::memcpy(kb + static_cast<size_t>((h * *rank + c) * nope + r) * es,
                      in + static_cast<size_t>((h * rows + r) * *rank + c) * es, es);
      std::memcpy(vb + static_cast<size_t>(h * *vd * *rank) * es,
                  in + static_cast<size_t>((h * rows + nope) * *rank) * es,
                  static_cast<size_t>(*vd * *rank) * es);
    }
    tensors.erase(it);
    added.push_back({b + "attn_k_b.weight", kvb.dtype, {*heads, *rank, nope}, kb, half});
    added.push_back({b + "attn_v_b.weight", kvb.dtype, {*heads, *vd, *rank}, vb, vbytes});
  }
  for (TensorRef& t : added) tensors.push_back(std::move(t));
  return Status::Ok();
}

}  // namespace ferry::formats
