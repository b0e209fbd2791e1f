// Pooling: how an embedding request turns its prompt's final hidden states into one vector
// (mean over the tokens, the last token's, or the first's — CLS), and the running state the
// model runner accumulates over a prompt's prefill chunks.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/metadata.h"

namespace ferry {

enum class Pooling { kNone, kMean, kLast, kCls };

const char* PoolingName(Pooling p);  // "none", "mean", "last", "cls"
StatusOr<Pooling> ParsePooling(std::string_view name);
// The model's pooling from GGUF "<arch>.pooling_type" (llama.cpp's numbering: 1 mean, 2 cls,
// 3 last); absent or 0 (none): last, the pooling of decoder-only embedding models and vLLM's
// default for them. Other values (rank) are unsupported.
StatusOr<Pooling> PoolingFromMetadata(const Metadata& md, std::string_view arch);

// One request's pooled hidden state, built token by token in position order. The sum is kept
// in double and added to in position order, so the vector does not depend on how prefill was
// split into chunks or batched with other requests.
class PooledState {
 public:
  // row: [dim], the final hidden state of the token at position `pos`.
  void Add(Pooling p, int32_t pos, const float* row, int32_t dim);
  void Reset() { acc_.clear(); }
  // The pooled vector, L2-normalized: [dim].
  std::vector<float> Finish() const;

 private:
  std::vector<double> acc_;  // [dim] sum (mean), or the chosen token's row
};

}  // namespace ferry
