// KvStorage: the K and V bytes of a KV cache, in the types chosen with --cache-type-k /
// --cache-type-v (f32, f16, bf16, q8_0, q4_0: kernels/kv_row.h). Token slots are rows of
// [n_kv_heads, head row]; a head row is quantized on write, per token and per head (q8_0/q4_0:
// blocks of 32 along head_dim), and the attention kernels read it in place through
// kernels::KvBlocks. The contiguous, paged and budgeted caches differ only in how they map
// (layer, sequence, position) to a slot index; the bytes, copies and the INT8 key copy of
// progressive attention live here once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "core/dtype.h"
#include "kernels/kernels.h"
#include "model/int8_key_copy.h"

namespace ferry {

// Element types of K and V in a KV cache. f16 by default, like llama.cpp's.
struct KvCacheTypes {
  DType k = DType::kF16;
  DType v = DType::kF16;
  // --cache-rotate: the model stores each head's K (and multiplies each head's q) rotated by
  // the orthonormal Hadamard matrix (kernels::HadamardRotate): scores are unchanged, while
  // K's outlier channels are spread before the cache rounds them. A property of the cached
  // bytes, so it is part of the cache's identity (prefix tiers fingerprint it).
  bool rotate_k = false;
  // > 0: V is not stored: a slot's value is the first v_in_k values of its K row (deepseek2's
  // latent attention, whose V is the latent part of K; llama.cpp's MLA cache stores no V either).
  // Then v must equal k. Set by KvCacheTypesFor from the model, never by a flag.
  int32_t v_in_k = 0;
  // Values per head that attention returns over such a cache (kernels::KvBlocks::ValueDim).
  int32_t ValueDim(int32_t head_dim) const { return v_in_k > 0 ? v_in_k : head_dim; }
  static KvCacheTypes F32() { return {DType::kF32, DType::kF32}; }
  bool operator==(const KvCacheTypes&) const = default;
};

// "f32|f16|bf16|q8_0|q4_0" -> the type; the error names `flag` and lists the valid names.
StatusOr<DType> ParseKvCacheType(std::string_view name, std::string_view flag);
// Whether a model with head_dim can store these types (q8_0/q4_0 need head_dim a multiple of
// 32: blocks never straddle heads); the error names the flag to change.
Status CheckKvCacheTypes(const KvCacheTypes& types, int32_t head_dim);

struct ModelConfig;
// The requested types with the layout `model`'s attention needs: v_in_k = kv_lora_rank for
// multi-head latent attention (an error unless --cache-type-v equals --cache-type-k, as in
// llama.cpp), 0 otherwise. Every cache made for a model gets its types through this.
StatusOr<KvCacheTypes> KvCacheTypesFor(const ModelConfig& model, KvCacheTypes requested);

class KvStorage {
 public:
  // Bytes of K plus V of one token slot (one layer).
  static size_t SlotBytes(int32_t n_kv_heads, int32_t head_dim, const KvCacheTypes& types);
  // n_slots token slots (not zeroed: attention reads only slots written before it). `what` names the cache
  // and `lower_flag` the option that shrinks it, for the out-of-memory error.
  Status Allocate(size_t n_slots, int32_t n_kv_heads, int32_t head_dim, const KvCacheTypes& types,
                  std::string_view what, std::string_view lower_flag);

  const KvCacheTypes& types() const { return types_; }
  int32_t n_kv_heads() const { return n_kv_heads_; }
  int32_t head_dim() const { return head_dim_; }
  size_t key_slot_bytes() const { return k_row_ * static_cast<size_t>(n_kv_heads_); }
  size_t value_slot_bytes() const { return v_row_ * static_cast<size_t>(n_kv_heads_); }
  // Bytes of the slots (K, V, the INT8 key copy); V's lead, under half a slot, is not counted.
  size_t Bytes() const { return k_.size() + v_.size() - v_lead_ + k_i8_.Bytes(); }

  // Writes head `head` of slot `slot` from head_dim floats, rounded to the stored type (values:
  // nothing when they live in K, types().v_in_k).
  void StoreKey(size_t slot, int32_t head, const float* x);
  void StoreValue(size_t slot, int32_t head, const float* x);
  // The stored values of slot `slot` as floats [n_kv_heads, head_dim] (values with v_in_k:
  // [n_kv_heads, v_in_k], read from K).
  void LoadKey(size_t slot, float* x) const;
  void LoadValue(size_t slot, float* x) const;
  // The raw bytes of a slot (key_slot_bytes / value_slot_bytes long).
  const uint8_t* KeyBytes(size_t slot) const { return k_.as<uint8_t>() + slot * key_slot_bytes(); }
  const uint8_t* ValueBytes(size_t slot) const { return ValueBase() + slot * value_slot_bytes(); }

  // Copies n slots from src to dst (K, V and the INT8 key copy; ranges may overlap).
  void CopySlots(size_t dst, size_t src, size_t n);
  // Bytes Export writes for n slots: their K, V and (when enabled) INT8 key copy.
  size_t ExportBytes(size_t n) const;
  // Copies n slots from first into `out` [ExportBytes(n)] as K bytes, V bytes, then the INT8
  // keys and their scales, and back (Import): the prefix cache's tiers keep evicted blocks so.
  void Export(size_t first, size_t n, uint8_t* out) const;
  void Import(size_t first, size_t n, const uint8_t* in);
  // Points view's K/V (and INT8 keys) at slot first_slot and sets its types.
  void Attach(kernels::KvBlocks& view, size_t first_slot) const;

  // Progressive attention's INT8 copy of the keys (model/int8_key_copy.h): off until enabled.
  Status EnableInt8Keys(std::string_view lower_flag);
  int8_t* KeyInt8(size_t slot) { return k_i8_.Keys(slot * row_elems()); }
  float* KeyScale(size_t slot) { return k_i8_.Scales(slot * row_elems()); }

 private:
  size_t row_elems() const { return static_cast<size_t>(n_kv_heads_) * static_cast<size_t>(head_dim_); }
  uint8_t* ValueBase() { return v_.as<uint8_t>() + v_lead_; }
  const uint8_t* ValueBase() const { return v_.as<uint8_t>() + v_lead_; }

  KvCacheTypes types_;
  int32_t n_kv_heads_ = 0, head_dim_ = 0;
  size_t n_slots_ = 0, k_row_ = 0, v_row_ = 0;  // k_row_, v_row_: bytes of one head row
  size_t v_lead_ = 0;                           // bytes of v_ before its first slot (kernels::KvValueLead)
  AlignedBuffer k_, v_;                         // [n_slots, n_kv_heads, head row of types_.k / types_.v]
  Int8KeyCopy k_i8_;                            // [n_slots, n_kv_heads, head_dim] int8, off unless enabled
};

}  // namespace ferry
