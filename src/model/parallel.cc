#include "model/parallel.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace ferry {

StatusOr<TensorShard> PlanTensorShard(const ModelConfig& c, int rank, int size) {
  if (size <= 1) return TensorShard{0, c.n_heads, 0, c.n_kv_heads, 0, c.ffn_dim, 0, c.n_vocab};
  if (c.n_heads % size != 0)
    return InvalidArgumentError("--tensor-parallel {}: the model's {} attention heads do not divide by it",
                                size, c.n_heads);
  if (c.n_kv_heads % size != 0 && size % c.n_kv_heads != 0)
    return InvalidArgumentError(
        "--tensor-parallel {}: the model's {} KV heads neither divide by it nor divide it (so no rank's "
        "query heads would share one KV head)",
        size, c.n_kv_heads);
  if (c.ffn_dim % size != 0)
    return InvalidArgumentError("--tensor-parallel {}: the FFN width {} does not divide by it", size,
                                c.ffn_dim);
  TensorShard s;
  s.n_q = c.n_heads / size;
  s.q_head0 = rank * s.n_q;
  const int32_t group = c.n_heads / c.n_kv_heads;  // query heads per KV head
  // n_kv_heads >= T: each rank its own KV heads; fewer: the one KV head its query heads read,
  // computed and cached on every rank that needs it.
  s.n_kv = c.n_kv_heads >= size ? c.n_kv_heads / size : 1;
  s.kv_head0 = s.q_head0 / group;
  s.n_ffn = c.ffn_dim / size;
  s.ffn0 = rank * s.n_ffn;
  // The vocabulary rarely divides: the first n_vocab % T ranks take one row more.
  const int64_t base = c.n_vocab / size, extra = c.n_vocab % size;
  s.n_vocab = base + (rank < extra ? 1 : 0);
  s.vocab0 = rank * base + std::min<int64_t>(rank, extra);
  return s;
}

StageLayers PlanStageLayers(int32_t n_layers, int stage, int n_stages) {
  const int32_t base = n_layers / n_stages, extra = n_layers % n_stages;
  StageLayers s;
  s.first = stage * base + std::min(stage, extra);
  s.last = s.first + base + (stage < extra ? 1 : 0);
  return s;
}

Linear SliceRows(const Linear& w, int64_t row0, int64_t n) {
  Linear out = w;
  const size_t row = RowBytes(w.type, w.n_in);
  out.data = static_cast<const uint8_t*>(w.data) + row * static_cast<size_t>(row0);
  out.n_out = n;
  out.bytes = row * static_cast<size_t>(n);
  out.packed.reset();
  if (w.w8a8_scale)
    out.w8a8_scale = std::make_shared<const std::vector<float>>(w.w8a8_scale->begin() + row0,
                                                                w.w8a8_scale->begin() + row0 + n);
  return out;
}

Status CheckColumnSlice(DType type, int64_t n_in, int64_t col0, int64_t n, const std::string& name) {
  if (IsFerryInt4(type))
    return UnsupportedError("tensor '{}' ({}): Ferry's int4 groups cannot be split by columns yet", name,
                            DTypeName(type));
  const int64_t block = Traits(type).block_size;
  if (col0 % block != 0 || n % block != 0)
    return InvalidArgumentError(
        "tensor '{}' ({}, blocks of {}): its columns [{}, {}) for this rank cut a quantization block; use a "
        "tensor-parallel size that splits {} columns into multiples of {}, or a file of another type",
        name, DTypeName(type), block, col0, col0 + n, n_in, block);
  return Status::Ok();
}

void CopyColumns(const void* src, DType type, int64_t n_out, int64_t n_in, int64_t col0, int64_t n,
                 uint8_t* dst) {
  const size_t src_row = RowBytes(type, n_in), dst_row = RowBytes(type, n), skip = RowBytes(type, col0);
  for (int64_t r = 0; r < n_out; ++r)
    std::memcpy(dst + dst_row * static_cast<size_t>(r),
                static_cast<const uint8_t*>(src) + src_row * static_cast<size_t>(r) + skip, dst_row);
}

StatusOr<Linear> SliceColumns(const Linear& w, int64_t col0, int64_t n, const std::string& name,
                              std::vector<std::shared_ptr<AlignedBuffer>>& keep) {
  FERRY_RETURN_IF_ERROR(CheckColumnSlice(w.type, w.n_in, col0, n, name));
  const size_t dst_row = RowBytes(w.type, n);
  auto buf = std::make_shared<AlignedBuffer>(dst_row * static_cast<size_t>(w.n_out));  // [n_out, n cols]
  CopyColumns(w.data, w.type, w.n_out, w.n_in, col0, n, buf->as<uint8_t>());
  Linear out = w;
  out.data = buf->data();
  out.n_in = n;
  out.bytes = dst_row * static_cast<size_t>(w.n_out);
  out.packed.reset();
  keep.push_back(std::move(buf));
  return out;
}

}  // namespace ferry
