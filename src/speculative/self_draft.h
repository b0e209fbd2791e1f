// Self-speculation: a draft model made of the target's own weights quantized in memory (no
// second file), sharing the target's tokenizer and architecture.
#pragma once

#include <memory>

#include "base/status.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "formats/loaded_source.h"
#include "model/model.h"

namespace ferry::spec {

struct QuantizedDraft {
  std::unique_ptr<formats::LoadedWeightSource> source;  // the quantized matrices (+ views of the rest)
  std::unique_ptr<Model> model;                         // reads `source`
};

// Every weight matrix of `target` whose rows split into whole blocks of `type` is re-quantized
// to `type` (dequantize each row to f32, then quantize); other tensors are shared with the
// target zero-copy, so `target` must outlive the result. type: q4_0 (the kernels' fastest
// 4-bit path) or any other type QuantizeRow writes.
StatusOr<QuantizedDraft> MakeQuantizedDraft(const formats::WeightSource& target, DType type,
                                            ThreadPool* pool);

}  // namespace ferry::spec
