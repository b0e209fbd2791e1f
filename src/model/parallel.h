// How one process's model is split over processes (docs/scaling.md): a tensor-parallel group
// sharing every layer Megatron-style (heads, FFN rows, vocabulary) and a pipeline of stages
// each owning a contiguous range of layers. The communicators belong to the caller and must
// outlive the model; null or a group of one means no split along that axis.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "comm/communicator.h"
#include "model/linear.h"
#include "model/model_config.h"

namespace ferry {

struct ParallelLayout {
  comm::Communicator* tp = nullptr;  // ranks of this stage sharing its layers
  comm::Communicator* pp = nullptr;  // one rank per stage, same tensor rank, ordered by stage
  int tp_rank() const { return tp ? tp->rank() : 0; }
  int tp_size() const { return tp ? tp->size() : 1; }
  int pp_rank() const { return pp ? pp->rank() : 0; }
  int pp_size() const { return pp ? pp->size() : 1; }
  bool Split() const { return tp_size() > 1 || pp_size() > 1; }
};

// This tensor rank's share of every layer and of the output head.
struct TensorShard {
  int32_t q_head0 = 0, n_q = 0;     // query heads [q_head0, q_head0 + n_q)
  int32_t kv_head0 = 0, n_kv = 0;   // KV heads computed and cached here (replicated when n_kv_heads < T)
  int64_t ffn0 = 0, n_ffn = 0;      // FFN rows of gate/up, columns of down
  int64_t vocab0 = 0, n_vocab = 0;  // output-head rows (logits) computed here
};

// Errors name the dimension that does not divide and the sizes that would.
StatusOr<TensorShard> PlanTensorShard(const ModelConfig& cfg, int rank, int size);
// Stage s of P owns layers [first, last): contiguous, the remainder on the first stages.
struct StageLayers {
  int32_t first = 0, last = 0;
};
StageLayers PlanStageLayers(int32_t n_layers, int stage, int n_stages);

// Rows [row0, row0 + n) of w: a view into the same bytes (rows are contiguous in GGUF order).
// Call before packing.
Linear SliceRows(const Linear& w, int64_t row0, int64_t n);
// Columns [col0, col0 + n) of every row of w: a copy, whose buffer is appended to `keep` (the
// model holds it as long as the Linear). Refuses a range that cuts a quantization block (q8_0/
// q4_0 are 32 wide, K-quants 256), naming the tensor.
// The column copy behind SliceColumns, for any [n_out, n_in] matrix of `type` (MoE experts):
// checks that [col0, col0 + n) cuts no quantization block (the error names `name`), then copies
// those columns of every row into dst: [n_out, RowBytes(type, n)].
Status CheckColumnSlice(DType type, int64_t n_in, int64_t col0, int64_t n, const std::string& name);
void CopyColumns(const void* src, DType type, int64_t n_out, int64_t n_in, int64_t col0, int64_t n,
                 uint8_t* dst);
StatusOr<Linear> SliceColumns(const Linear& w, int64_t col0, int64_t n, const std::string& name,
                              std::vector<std::shared_ptr<AlignedBuffer>>& keep);

}  // namespace ferry
