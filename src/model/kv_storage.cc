#include "model/kv_storage.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "base/check.h"
#include "kernels/kv_row.h"
#include "model/model_config.h"

namespace ferry {

StatusOr<DType> ParseKvCacheType(std::string_view name, std::string_view flag) {
  if (name.find(',') != std::string_view::npos)
    return InvalidArgumentError(
        "{} '{}': one type here (a comma-separated list is for the model bench, ferry bench -m)", flag, name);
  std::optional<DType> t = DTypeFromName(name);
  if (!t || !kernels::IsKvType(*t))
    return InvalidArgumentError("{} '{}': expected one of f32, f16, bf16, q8_0, q4_0", flag, name);
  return *t;
}

Status CheckKvCacheTypes(const KvCacheTypes& types, int32_t head_dim) {
  auto check = [&](DType t, const char* flag) -> Status {
    if (!kernels::IsKvType(t))
      return InvalidArgumentError("{} {}: a KV cache stores f32, f16, bf16, q8_0 or q4_0", flag,
                                  DTypeName(t));
    if (!kernels::KvTypeFits(t, head_dim))
      return InvalidArgumentError(
          "{} {} quantizes each head in blocks of {} values, but this model's head_dim is {}; use f16, bf16 "
          "or "
          "f32",
          flag, DTypeName(t), Traits(t).block_size, head_dim);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(check(types.k, "--cache-type-k"));
  if (types.v_in_k > 0) {  // V is the first v_in_k values of each K row
    if (types.v != types.k)
      return InvalidArgumentError(
          "this model keeps V inside its K cache rows (multi-head latent attention): --cache-type-v {} must "
          "equal --cache-type-k {}",
          DTypeName(types.v), DTypeName(types.k));
    if (types.rotate_k)
      return InvalidArgumentError(
          "--cache-rotate would rotate V with K in this model's latent cache rows; drop it");
    if (types.v_in_k > head_dim || !kernels::KvTypeFits(types.k, types.v_in_k))
      return InvalidArgumentError(
          "--cache-type-k {}: the latent values ({} of each {}-value row) must be whole blocks",
          DTypeName(types.k), types.v_in_k, head_dim);
    return Status::Ok();
  }
  if (types.rotate_k && (head_dim <= 0 || (head_dim & (head_dim - 1)) != 0))
    return InvalidArgumentError(
        "--cache-rotate needs a head_dim that is a power of two (a Hadamard transform per head), but this "
        "model's head_dim is {}; drop --cache-rotate",
        head_dim);
  return check(types.v, "--cache-type-v");
}

StatusOr<KvCacheTypes> KvCacheTypesFor(const ModelConfig& model, KvCacheTypes requested) {
  requested.v_in_k = model.IsMla() ? model.kv_lora_rank : 0;
  FERRY_RETURN_IF_ERROR(CheckKvCacheTypes(requested, model.head_dim));
  return requested;
}

size_t KvStorage::SlotBytes(int32_t n_kv_heads, int32_t head_dim, const KvCacheTypes& types) {
  const size_t v = types.v_in_k > 0 ? 0 : kernels::KvRowBytes(types.v, head_dim);  // V lives in K
  return static_cast<size_t>(n_kv_heads) * (kernels::KvRowBytes(types.k, head_dim) + v);
}

Status KvStorage::Allocate(size_t n_slots, int32_t n_kv_heads, int32_t head_dim, const KvCacheTypes& types,
                           std::string_view what, std::string_view lower_flag) {
  FERRY_RETURN_IF_ERROR(CheckKvCacheTypes(types, head_dim));
  types_ = types;
  n_kv_heads_ = n_kv_heads;
  head_dim_ = head_dim;
  n_slots_ = n_slots;
  k_row_ = kernels::KvRowBytes(types.k, head_dim);
  v_row_ = types.v_in_k > 0 ? 0 : kernels::KvRowBytes(types.v, head_dim);
  try {
    k_ = AlignedBuffer(n_slots * key_slot_bytes());
    v_lead_ = value_slot_bytes() > 0 ? kernels::KvValueLead(key_slot_bytes()) : 0;
    v_ = AlignedBuffer(v_lead_ + n_slots * value_slot_bytes());
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("cannot allocate {} of {} MiB; lower {}", what,
                                  n_slots * (key_slot_bytes() + value_slot_bytes()) >> 20, lower_flag);
  }
  return Status::Ok();  // not zeroed: attention reads only slots written before it
}

void KvStorage::StoreKey(size_t slot, int32_t head, const float* x) {
  FERRY_DCHECK(slot < n_slots_ && head >= 0 && head < n_kv_heads_);
  kernels::QuantizeRow(types_.k, x, k_.as<uint8_t>() + slot * key_slot_bytes() + head * k_row_, head_dim_);
}
void KvStorage::StoreValue(size_t slot, int32_t head, const float* x) {
  FERRY_DCHECK(slot < n_slots_ && head >= 0 && head < n_kv_heads_);
  if (types_.v_in_k > 0) return;  // the values are the key rows' first v_in_k
  kernels::QuantizeRow(types_.v, x, ValueBase() + slot * value_slot_bytes() + head * v_row_, head_dim_);
}

void KvStorage::LoadKey(size_t slot, float* x) const {
  for (int32_t h = 0; h < n_kv_heads_; ++h)
    kernels::DequantizeRow(types_.k, KeyBytes(slot) + h * k_row_, x + int64_t{h} * head_dim_, head_dim_);
}
void KvStorage::LoadValue(size_t slot, float* x) const {
  if (types_.v_in_k > 0) {
    std::vector<float> row(static_cast<size_t>(head_dim_));  // [head_dim] one K row
    for (int32_t h = 0; h < n_kv_heads_; ++h) {
      kernels::DequantizeRow(types_.k, KeyBytes(slot) + h * k_row_, row.data(), head_dim_);
      std::copy_n(row.data(), types_.v_in_k, x + int64_t{h} * types_.v_in_k);
    }
    return;
  }
  for (int32_t h = 0; h < n_kv_heads_; ++h)
    kernels::DequantizeRow(types_.v, ValueBytes(slot) + h * v_row_, x + int64_t{h} * head_dim_, head_dim_);
}

void KvStorage::CopySlots(size_t dst, size_t src, size_t n) {
  FERRY_CHECK(dst + n <= n_slots_ && src + n <= n_slots_);
  std::memmove(k_.as<uint8_t>() + dst * key_slot_bytes(), KeyBytes(src), n * key_slot_bytes());
  if (value_slot_bytes() > 0)
    std::memmove(ValueBase() + dst * value_slot_bytes(), ValueBytes(src), n * value_slot_bytes());
  k_i8_.Copy(dst * row_elems(), src * row_elems(), n * row_elems());
}

size_t KvStorage::ExportBytes(size_t n) const {
  size_t b = n * (key_slot_bytes() + value_slot_bytes());
  if (k_i8_.enabled()) b += n * row_elems() + n * static_cast<size_t>(n_kv_heads_) * sizeof(float);
  return b;
}

void KvStorage::Export(size_t first, size_t n, uint8_t* out) const {
  FERRY_CHECK(first + n <= n_slots_);
  std::memcpy(out, KeyBytes(first), n * key_slot_bytes());
  out += n * key_slot_bytes();
  if (value_slot_bytes() > 0) std::memcpy(out, ValueBytes(first), n * value_slot_bytes());
  out += n * value_slot_bytes();
  if (!k_i8_.enabled()) return;
  std::memcpy(out, k_i8_.Keys(first * row_elems()), n * row_elems());
  out += n * row_elems();
  std::memcpy(out, k_i8_.Scales(first * row_elems()), n * static_cast<size_t>(n_kv_heads_) * sizeof(float));
}

void KvStorage::Import(size_t first, size_t n, const uint8_t* in) {
  FERRY_CHECK(first + n <= n_slots_);
  std::memcpy(k_.as<uint8_t>() + first * key_slot_bytes(), in, n * key_slot_bytes());
  in += n * key_slot_bytes();
  if (value_slot_bytes() > 0)
    std::memcpy(ValueBase() + first * value_slot_bytes(), in, n * value_slot_bytes());
  in += n * value_slot_bytes();
  if (!k_i8_.enabled()) return;
  std::memcpy(k_i8_.Keys(first * row_elems()), in, n * row_elems());
  in += n * row_elems();
  std::memcpy(k_i8_.Scales(first * row_elems()), in, n * static_cast<size_t>(n_kv_heads_) * sizeof(float));
}

void KvStorage::Attach(kernels::KvBlocks& view, size_t first_slot) const {
  view.k_cache = KeyBytes(first_slot);
  view.v_cache = types_.v_in_k > 0 ? view.k_cache : ValueBytes(first_slot);
  view.k_type = types_.k;
  view.v_type = types_.v;
  view.v_in_k = types_.v_in_k;
  k_i8_.Attach(view, first_slot * row_elems());
}

Status KvStorage::EnableInt8Keys(std::string_view lower_flag) {
  return k_i8_.Allocate(n_slots_ * row_elems(), head_dim_, lower_flag);
}

}  // namespace ferry
