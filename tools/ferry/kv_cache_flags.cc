// The KV cache type flags shared by run, ppl, bench, bench throughput and serve.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "commands.h"

namespace ferry::cli {

void KvCacheFlags::Add(CLI::App* cmd) {
  const char* types = "f32|f16|bf16|q8_0|q4_0 (ferry bench: a comma-separated list)";
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

StatusOr<std::vector<KvCacheTypes>> KvCacheFlags::ToTypeList() const {
  auto split = [](const std::string& list, const char* flag) -> StatusOr<std::vector<std::string>> {
    std::vector<std::string> items;
    size_t at = 0;
    for (;;) {
      const size_t comma = list.find(',', at);
      items.push_back(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (items.back().empty() && !list.empty())
        return InvalidArgumentError("{} '{}': an empty item in the list (write e.g. f16,q8_0)", flag, list);
      if (comma == std::string::npos) return items;
      at = comma + 1;
    }
  };
  FERRY_ASSIGN_OR_RETURN(auto ds, split(dtype, "--kv-cache-dtype"));
  FERRY_ASSIGN_OR_RETURN(auto ks, split(type_k, "--cache-type-k"));
  FERRY_ASSIGN_OR_RETURN(auto vs, split(type_v, "--cache-type-v"));
  // Every combination in the order given; "" where a flag is not given (ToTypes' default, or
  // its error when --kv-cache-dtype comes with --cache-type-k/-v).
  std::vector<KvCacheTypes> out;
  for (const std::string& d : ds)
    for (const std::string& k : ks)
      for (const std::string& v : vs) {
        KvCacheFlags one = *this;
        one.dtype = d;
        one.type_k = k;
        one.type_v = v;
        FERRY_ASSIGN_OR_RETURN(KvCacheTypes t, one.ToTypes());
        out.push_back(t);
      }
  return out;
}

}  // namespace ferry::cli
