#include "speculative/self_draft.h"

#include <vector>

#include "kernels/kernels.h"

namespace ferry::spec {

StatusOr<QuantizedDraft> MakeQuantizedDraft(const formats::WeightSource& target, DType type,
                                            ThreadPool* pool) {
  if (!kernels::CanQuantize(type) ||
      !(kernels::CanMatMul(type) || kernels::CanPack(type, Traits(type).block_size)))
    return InvalidArgumentError("cannot quantize a self-draft to type '{}' (use q4_0)", DTypeName(type));
  QuantizedDraft d;
  d.source =
      std::make_unique<formats::LoadedWeightSource>(target.path() + " (self-draft " + DTypeName(type) + ")");
  d.source->mutable_metadata() = target.metadata();
  const int64_t block = Traits(type).block_size;
  for (const formats::TensorRef& t : target.tensors()) {
    formats::TensorRef out = t;
    const bool matrix = t.shape.size() == 2 && t.shape[1] % block == 0 && t.dtype != type;
    if (matrix && kernels::CanDequantize(t.dtype)) {
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const size_t src_row = RowBytes(t.dtype, cols), dst_row = RowBytes(type, cols);
      void* dst = d.source->AllocateOwned(dst_row * static_cast<size_t>(rows));
      if (!dst) return ResourceExhaustedError("no memory for the self-draft copy of '{}'", t.name);
      const auto* src = static_cast<const uint8_t*>(t.data);
      auto convert = [&](int64_t r0, int64_t r1) {
        std::vector<float> row(static_cast<size_t>(cols));  // [cols]
        for (int64_t r = r0; r < r1; ++r) {
          kernels::DequantizeRow(t.dtype, src + src_row * static_cast<size_t>(r), row.data(), cols);
          kernels::QuantizeRow(type, row.data(),
                               static_cast<uint8_t*>(dst) + dst_row * static_cast<size_t>(r), cols);
        }
      };
      if (pool) {
        pool->ParallelFor(rows, convert);
      } else {
        convert(0, rows);
      }
      out.dtype = type;
      out.data = dst;
      out.nbytes = dst_row * static_cast<size_t>(rows);
    }
    d.source->mutable_tensors().push_back(std::move(out));
  }
  FERRY_ASSIGN_OR_RETURN(d.model, CreateModel(*d.source));
  return d;
}

}  // namespace ferry::spec
