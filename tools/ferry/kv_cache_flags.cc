// The KV cache type flags shared by run, ppl, bench, bench throughput and serve.
#include <fmt/format.h>

#include "commands.h"

namespace ferry::cli {

void KvCacheFlags::Add(CLI::App* cmd) {
  const char* types = "f32|f16|bf16|q8_0|q4_0";
  cmd->add_option("--cache-type-k", type_k, fmt::format("KV cache type of K: {} (default f16)", types))
      ->group("KV cache");
  cmd->add_option("--cache-type-v", type_v, fmt::format("KV cache type of V: {} (default f16)", types))
      ->group("KV cache");
  cmd->add_option("--kv-cache-dtype", dtype, fmt::format("KV cache type of K and V: {}", types))
      ->group("KV cache");
  cmd->add_flag(
         "--cache-rotate", rotate_k,
         "store K rotated by a Hadamard transform per head (q rotated alike, scores unchanged): spreads K's "
         "outlier channels before q4_0/q8_0 rounding; head_dim must be a power of two")
      ->group("KV cache");
}

StatusOr<KvCacheTypes> KvCacheFlags::ToTypes() const {
  KvCacheTypes t;
  if (!dtype.empty()) {
    if (!type_k.empty() || !type_v.empty())
      return InvalidArgumentError(
          "--kv-cache-dtype sets both K and V: give it or --cache-type-k/-v, not both");
    FERRY_ASSIGN_OR_RETURN(t.k, ParseKvCacheType(dtype, "--kv-cache-dtype"));
    t.v = t.k;
  }
  if (!type_k.empty()) {
    FERRY_ASSIGN_OR_RETURN(t.k, ParseKvCacheType(type_k, "--cache-type-k"));
  }
  if (!type_v.empty()) {
    FERRY_ASSIGN_OR_RETURN(t.v, ParseKvCacheType(type_v, "--cache-type-v"));
  }
  t.rotate_k = rotate_k;
  return t;
}

}  // namespace ferry::cli
